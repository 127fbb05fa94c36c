// Package kgoslog bridges franz-go's logger to log/slog, so the sink's one
// *slog.Logger also carries the client's own messages.
package kgoslog

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger adapts a *slog.Logger to kgo.Logger.
type Logger struct {
	L *slog.Logger
}

var _ kgo.Logger = Logger{}

// Level maps the slog level the handler enables to the most verbose kgo
// level, so kgo does not build messages nobody reads. kgo logs every
// transaction at its info level, which is debug detail for a sink's user, so
// both kgo debug and info go to slog's debug.
func (l Logger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case l.L.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case l.L.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case l.L.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// Log writes one kgo message at the matching slog level.
func (l Logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var sl slog.Level
	switch level {
	case kgo.LogLevelError:
		sl = slog.LevelError
	case kgo.LogLevelWarn:
		sl = slog.LevelWarn
	default:
		sl = slog.LevelDebug
	}
	l.L.Log(context.Background(), sl, msg, keyvals...)
}
