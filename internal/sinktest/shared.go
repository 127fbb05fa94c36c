package sinktest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// The helpers the root module's tests share with kafkasinkavro's, under
// the names the root's tests use: each lives once, in the public kit.

// Absent is kafkasinktest.Absent.
type Absent = kafkasinktest.Absent

// DiffTrees is kafkasinktest.DiffTrees.
func DiffTrees(path string, want, got any, same func(want, got any) bool, add func(path string, want, got any)) {
	kafkasinktest.DiffTrees(path, want, got, same, add)
}

// DropSlot is pgtest.DropSlot.
func DropSlot(ctx context.Context, db *pgx.Conn, slot string) { pgtest.DropSlot(ctx, db, slot) }

// SkipWithoutExtension is pgtest.SkipWithoutExtension.
func SkipWithoutExtension(t testing.TB, db *pgx.Conn, name string) {
	t.Helper()
	pgtest.SkipWithoutExtension(t, db, name)
}

// LoadTypesSQL is pgtest.LoadTypesSQL.
func LoadTypesSQL(t testing.TB, name string) pgtest.TypesSQL {
	t.Helper()
	return pgtest.LoadTypesSQL(t, name)
}

// TypesGoldenFile is pgtest.TypesGoldenFile.
func TypesGoldenFile(t testing.TB) string {
	t.Helper()
	return pgtest.TypesGoldenFile(t)
}

// TypesGolden is pgtest.TypesGolden.
func TypesGolden(t testing.TB, values [][]byte, name string) []byte {
	t.Helper()
	return pgtest.TypesGolden(t, values, name)
}
