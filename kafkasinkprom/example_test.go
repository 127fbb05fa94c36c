package kafkasinkprom_test

import (
	"context"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkprom"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// A sink's and a Run's metrics on /metrics: register both collectors on a
// registry and serve it. cmd/kafkasink does this with -http-addr.
func Example() {
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: []string{"127.0.0.1:9092"}, SinkID: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)
	mon := new(pgcdc.Monitor)

	reg := prometheus.NewRegistry()
	reg.MustRegister(kafkasinkprom.NewCollector(sink), kafkasinkprom.NewRunCollector(mon, "shop"))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go func() { log.Print(http.ListenAndServe("127.0.0.1:9187", nil)) }()

	err = pgcdc.Run(ctx, pgcdc.Config{
		ConnString:  "postgres://cdc:secret@127.0.0.1:5432/shop",
		Slot:        "shop",
		Publication: "shop",
		Tables:      []string{"public.orders"},
		Monitor:     mon,
	}, sink)
	log.Print(err)
}
