package kafkasinkavro_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestAnnotationsOnlyInHeaders: the schema'd encoders of this module do
// not write kafkasink.Config.Annotations into their values, whose schemas
// have no field for them, as the package documentation says: kafkasink.New
// refuses AnnotateValue and AnnotateBoth with each, naming
// AnnotateHeaders, and starts with AnnotateHeaders.
func TestAnnotationsOnlyInHeaders(t *testing.T) {
	t.Parallel()
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	avro, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jsonschema.New(jsonschema.Config{Registry: cl})
	if err != nil {
		t.Fatal(err)
	}
	dbz, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: cl}, debezium.Encoder{WriteAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	brokers := kafkasinktest.NewCluster(t).Brokers()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, enc := range []kafkasink.Encoder{avro, js, dbz} {
		cfg := kafkasink.Config{Brokers: brokers, SinkID: "annotations", Encoder: enc, KeyFormat: kafkasink.KeyJSON,
			Annotations: map[string]string{"env": "prod"}}
		for _, in := range []kafkasink.AnnotationPlace{kafkasink.AnnotateValue, kafkasink.AnnotateBoth} {
			cfg.AnnotationsIn = in
			_, err := kafkasink.New(ctx, cfg)
			var ce *kafkasink.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not write annotations") || !strings.Contains(err.Error(), "AnnotateHeaders") {
				t.Errorf("%T, AnnotationsIn %s: %v, want a *ConfigError naming AnnotateHeaders", enc, in, err)
			}
		}
		cfg.AnnotationsIn = kafkasink.AnnotateHeaders
		s, err := kafkasink.New(ctx, cfg)
		if err != nil {
			t.Errorf("%T, AnnotationsIn headers: %v", enc, err)
			continue
		}
		s.Close(ctx)
	}
}
