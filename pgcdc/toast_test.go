package pgcdc

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKeyChangeKeepsUnchangedTOAST updates the key of a row whose TOASTed
// column the update does not touch. With REPLICA IDENTITY FULL every
// encoder's record under the new key must hold the value the database
// holds; with DEFAULT the value cannot be known, so the upsert document
// must say it is partial, and Run must have warned about the table at
// start-up.
func TestKeyChangeKeepsUnchangedTOAST(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	full, dflt, small := e.name+"_full", e.name+"_dflt", e.name+"_small"
	for _, tb := range []string{full, dflt} {
		e.exec("CREATE TABLE " + tb + " (id int PRIMARY KEY, note text, big text)")
		// Out of line and uncompressed, so an update that does not touch
		// it sends it as an unchanged TOAST value.
		e.exec("ALTER TABLE " + tb + " ALTER COLUMN big SET STORAGE EXTERNAL")
	}
	e.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	e.exec("CREATE TABLE " + small + " (id int PRIMARY KEY, n int, t timestamptz)") // nothing TOASTable
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + full + ", " + dflt + ", " + small)

	logs := newLogRecorder(t)
	cfg := e.config()
	cfg.CreatePublication = false
	cfg.Logger = slog.New(logs)
	_, done := start(t, cfg, e.newEncoderSinks())
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	for _, tb := range []string{full, dflt} {
		e.exec("INSERT INTO " + tb + " VALUES (1, 'new', repeat('x', 3000) || 'end')")
		e.exec("UPDATE " + tb + " SET id = 2 WHERE id = 1") // the key changes, big does not
		e.exec("UPDATE " + tb + " SET note = 'upd'")        // big does not change
	}

	var big string
	e.mu.Lock()
	err := e.db.QueryRow(context.Background(), "SELECT big FROM "+full+" WHERE id = 2").Scan(&big)
	e.mu.Unlock()
	if err != nil || !strings.HasSuffix(big, "end") {
		t.Fatalf("the database holds big of %d bytes (%v)", len(big), err)
	}

	// Per table and encoder, the records in topic order (one
	// partition): insert, delete + insert of the key change, update. The
	// DEFAULT table's changes come last, and the Debezium sink is written
	// last: once they are there, everything is.
	e.readEncoded(done, "debezium", dflt, 4)
	for _, prefix := range encoderPrefixes {
		recs := e.readEncoded(done, prefix, full, 1)
		n := 0
		for _, rec := range recs {
			v := rec.value
			if img, _ := rowImage(prefix, v); img != nil && img["id"] == 2.0 {
				n++
				if rec.key != "2" {
					t.Errorf("%s, FULL: a record of the row with id 2 has key %q, want the primary key 2", prefix, rec.key)
				}
				if img["big"] != big {
					t.Errorf("%s, FULL: a record under the new key has big %.20q..., the database %d bytes", prefix, img["big"], len(big))
				}
				if prefix == "upsert" && v["operation"] != "upsert" {
					t.Errorf("upsert, FULL: operation %v for a whole row, want upsert", v["operation"])
				}
			}
		}
		if n != 2 {
			t.Errorf("%s, FULL: %d records under the new key, want 2 (the key change's insert, the update)", prefix, n)
		}
	}
	partial := 0
	for _, rec := range e.readEncoded(done, "upsert", dflt, 1) {
		v := rec.value
		img, _ := rowImage("upsert", v)
		if img == nil || img["id"] != 2.0 {
			continue
		}
		partial++
		md, _ := v["metadata"].(map[string]any)
		if _, has := img["big"]; has || v["operation"] != "partial" || !slices.Equal(md["unchanged"].([]any), []any{"big"}) {
			t.Errorf("upsert, DEFAULT: a document without the value of big must be operation partial with unchanged [big]: %v", v)
		}
	}
	if partial != 2 {
		t.Errorf("upsert, DEFAULT: %d documents under the new key, want 2", partial)
	}

	warned := logs.find("published tables without REPLICA IDENTITY FULL")
	if len(warned) != 1 {
		t.Fatalf("%d start-up warnings about TOASTable tables, want 1", len(warned))
	}
	listed := warned[0]["tables"]
	if !strings.Contains(listed, dflt) || strings.Contains(listed, full) || strings.Contains(listed, small) {
		t.Errorf("the warning lists %s; want %s and neither %s (FULL) nor %s (nothing TOASTable)", listed, dflt, full, small)
	}
}
