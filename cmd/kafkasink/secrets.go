package main

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Secrets come from the environment or from files, never from a flag (the
// process list shows flags) nor from the configuration file (usually
// readable by more people and tools than the process).

// secretKeys are keys the file must not have, and what to use instead.
var secretKeys = map[string]string{
	"sasl_password":            "sasl_password_file (-sasl-password-file) or $KAFKASINK_SASL_PASSWORD",
	"pg_password":              "pg_password_file (-pg-password-file) or $PGPASSWORD",
	"schema_registry_password": "schema_registry_password_file (-schema-registry-password-file)",
	"schema_registry_token":    "schema_registry_token_file (-schema-registry-token-file)",
	"password":                 "sasl_password_file or $KAFKASINK_SASL_PASSWORD for Kafka, pg_password_file or $PGPASSWORD for PostgreSQL",
}

// readSecretFile returns the secret in the file at path, without a
// trailing newline; flag names the setting, for errors. The secret is
// never part of an error.
func readSecretFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if secret == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return secret, nil
}

// keywordPassword finds a password in a keyword/value connection string.
var keywordPassword = regexp.MustCompile(`(^|\s)password\s*=`)

// connStringHasPassword reports whether the PostgreSQL connection string s
// holds a password (in a URL's user information or password parameter, or
// a password keyword).
func connStringHasPassword(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return false // pgcdc.Run reports the string does not parse
		}
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return keywordPassword.MatchString(s)
}
