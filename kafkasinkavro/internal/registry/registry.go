// Package registry is what the module's encoders and decoders share
// about the Schema Registry: registering a table version's schemas inside
// a Write, with the registry's answers classified for the sink, the table
// versions prepared so far, and the Confluent wire format's header, read
// with the schemas of its ids cached.
package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
)

// Register registers schema under subject for table and returns its id;
// pkg names the encoder's package in errors. A registry that answers 5xx,
// or not at all, is a retryable *kafkasink.PrepareError; a refusal a
// fatal one naming the table, the subject, the registry's status and
// message, and the fix: conflict's for a 409 (an incompatible schema),
// the credentials for a 401 or 403.
func Register(ctx context.Context, cl *sr.Client, pkg, table, subject string, schema sr.Schema, conflict func() string) (int, error) {
	id, err := cl.RegisterSchema(ctx, subject, schema, -1, -1)
	if err == nil {
		return id, nil
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("%s: registering the schema of %s under subject %s: %w", pkg, table, subject, err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		// No answer: the registry is down or unreachable, which may pass.
		return 0, &kafkasink.PrepareError{Retryable: true, Err: fmt.Errorf("%s: registering the schema of %s under subject %s: %w", pkg, table, subject, err)}
	}
	if re.StatusCode >= 500 {
		return 0, &kafkasink.PrepareError{Retryable: true, Err: fmt.Errorf("%s: registering the schema of %s under subject %s: the Schema Registry answered HTTP %d: %s",
			pkg, table, subject, re.StatusCode, re.Message)}
	}
	var fix string
	switch re.StatusCode {
	case 409:
		fix = conflict()
	case 401, 403:
		fix = "check the registry's credentials (sr.BasicAuth, sr.BearerToken; -schema-registry-user and -schema-registry-password-file, or -schema-registry-token-file) and that they may register schemas"
	default:
		fix = "the registry refused the schema; report it with the schema text: " + schema.Schema
	}
	return 0, &kafkasink.PrepareError{Err: fmt.Errorf("%s: the Schema Registry refused the schema of %s under subject %s (HTTP %d: %s): %s",
		pkg, table, subject, re.StatusCode, re.Message, fix)}
}

// Compatibility names the compatibility level that applies to subject:
// its own, and the registry's global one.
func Compatibility(ctx context.Context, cl *sr.Client, subject string) string {
	res := cl.Compatibility(ctx, subject, sr.GlobalSubject)
	level := func(r sr.CompatibilityResult) string {
		if r.Err != nil {
			return "not set"
		}
		return r.Level.String()
	}
	return "subject " + level(res[0]) + ", global " + level(res[1])
}
