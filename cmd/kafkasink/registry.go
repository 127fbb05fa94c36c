package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
)

// config returns the Avro encoder's configuration of the registry flags
// (its Registry is the JSON Schema encoder's too):
// its client's URLs, TLS and authentication, and its subject strategy.
// Problems name the flags.
func (r *registryOptions) config() (kafkasinkavro.Config, error) {
	if r.url == "" {
		return kafkasinkavro.Config{}, errors.New("-encoder avro, json-schema and debezium-avro need -schema-registry (or $KAFKASINK_SCHEMA_REGISTRY): the Schema Registry's URL")
	}
	urls := splitList(r.url)
	opts := []sr.ClientOpt{sr.URLs(urls...), sr.UserAgent("kafkasink")}
	var problems []string
	if r.tlsCA != "" || r.tlsCert != "" || r.tlsKey != "" {
		for _, u := range urls {
			if parsed, err := url.Parse(u); err != nil || parsed.Scheme != "https" {
				problems = append(problems, fmt.Sprintf("-schema-registry %q: -schema-registry-tls-ca, -schema-registry-tls-cert and -schema-registry-tls-key need https:// URLs", u))
			}
		}
		if (r.tlsCert == "") != (r.tlsKey == "") {
			problems = append(problems, "-schema-registry-tls-cert and -schema-registry-tls-key go together (mutual TLS)")
		}
		tlsCfg, err := (&kafkasink.TLS{CAFile: r.tlsCA, CertFile: r.tlsCert, KeyFile: r.tlsKey}).ClientConfig()
		if err != nil {
			problems = append(problems, "-schema-registry-tls-*: "+err.Error())
		}
		opts = append(opts, sr.DialTLSConfig(tlsCfg))
	}
	if r.user != "" || r.passwordFile != "" {
		if r.user == "" || r.passwordFile == "" {
			problems = append(problems, "-schema-registry-user and -schema-registry-password-file go together (basic authentication)")
		} else if password, err := readSecretFile("-schema-registry-password-file", r.passwordFile); err != nil {
			problems = append(problems, err.Error())
		} else {
			opts = append(opts, sr.BasicAuth(r.user, password))
		}
	}
	if r.tokenFile != "" {
		if r.user != "" || r.passwordFile != "" {
			problems = append(problems, "-schema-registry-token-file and -schema-registry-user/-schema-registry-password-file are both set: give the registry one kind of authentication")
		}
		if _, err := readSecretFile("-schema-registry-token-file", r.tokenFile); err != nil {
			problems = append(problems, err.Error())
		}
		opts = append(opts, sr.PreReq(r.setBearerToken))
	}
	subjects, ok := kafkasinkavro.ParseSubjectStrategy(r.subjects)
	if !ok {
		problems = append(problems, fmt.Sprintf("-schema-registry-subjects %q: want TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy", r.subjects))
	}
	if problems != nil {
		return kafkasinkavro.Config{}, errors.New(strings.Join(problems, "; "))
	}
	reg, err := sr.NewClient(opts...)
	if err != nil {
		return kafkasinkavro.Config{}, fmt.Errorf("-schema-registry: %w", err)
	}
	return kafkasinkavro.Config{Registry: reg, Subjects: subjects, Namespace: r.namespace}, nil
}

// setBearerToken is the registry client's PreReq with
// -schema-registry-token-file: the file is read for every request, so
// that a rotated token is used from the next request on.
func (r *registryOptions) setBearerToken(req *http.Request) error {
	token, err := readSecretFile("-schema-registry-token-file", r.tokenFile)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return nil
}

// changed names the flags set to other than their defaults.
func (r *registryOptions) changed() []string {
	def := registryDefaults
	var names []string
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"-schema-registry", r.url != def.url},
		{"-schema-registry-subjects", r.subjects != def.subjects},
		{"-schema-registry-namespace", r.namespace != def.namespace},
		{"-schema-registry-user", r.user != def.user},
		{"-schema-registry-password-file", r.passwordFile != def.passwordFile},
		{"-schema-registry-token-file", r.tokenFile != def.tokenFile},
		{"-schema-registry-tls-ca", r.tlsCA != def.tlsCA},
		{"-schema-registry-tls-cert", r.tlsCert != def.tlsCert},
		{"-schema-registry-tls-key", r.tlsKey != def.tlsKey},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	return names
}
