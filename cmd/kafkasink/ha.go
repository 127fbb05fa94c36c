package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// leaseOptions are the flags of high availability: -ha and
// -lease-timeout.
type leaseOptions struct {
	enabled bool
	timeout time.Duration
}

// lead waits, with -ha, until this replica holds the slot's lease (see
// pgcdc.AcquireLease), which it must before kafkasink.New claims the
// sink's transactional id: a standby that created its sink first would
// fence the active replica. It returns a context that ends when the lease
// is lost, with the lease's error as its cause, the lease's check for the
// sink's Config.Guard (so that a replica resumed after a freeze sends
// nothing that would abort its successor's transaction), and the function
// that releases the lease. Without -ha it returns ctx, no check and
// nothing to release.
func lead(ctx context.Context, o leaseOptions, pcfg pgcdc.Config, logger *slog.Logger) (context.Context, func() error, func(), error) {
	if !o.enabled {
		logger.Info("-ha=false: no lease; a second instance with the same configuration would fence this one")
		return ctx, nil, func() {}, nil
	}
	lease, err := pgcdc.AcquireLease(ctx, leaseConfig(pcfg, o, logger))
	if err != nil {
		return nil, nil, nil, err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lease.Lost():
			cancel(lease.Err())
		case <-lctx.Done():
		}
	}()
	return lctx, lease.Check, func() {
		cancel(nil)
		lease.Release()
	}, nil
}

// leaseConfig is the lease of the slot of pcfg, as -ha takes it, and as
// configs checks it before anything waits for it.
func leaseConfig(pcfg pgcdc.Config, o leaseOptions, logger *slog.Logger) pgcdc.LeaseConfig {
	return pgcdc.LeaseConfig{
		ConnString:    pcfg.ConnString,
		ConfigureConn: pcfg.ConfigureConn,
		Slot:          pcfg.Slot,
		Timeout:       o.timeout,
		Logger:        logger,
	}
}

// takenOver reports whether err says another instance took over: it
// fenced this one's sink, or this one lost its lease. Either way this
// one must stop and write nothing more; exit status 3.
func takenOver(err error) bool {
	return errors.Is(err, kafkasink.ErrFenced) || errors.Is(err, pgcdc.ErrLeaseLost)
}
