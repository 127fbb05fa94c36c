package pgcdc

import "github.com/kafkasink/kafkasink/pgcdc/pgoutput"

// The Decoder lives in package pgoutput; these names keep pgcdc's API as
// it was. Run builds its Decoder with pgoutput.NewDecoder like any user.
type (
	// Decoder is pgoutput.Decoder.
	Decoder = pgoutput.Decoder
	// DecoderConfig is pgoutput.DecoderConfig.
	DecoderConfig = pgoutput.DecoderConfig
	// Txn is pgoutput.Txn.
	Txn = pgoutput.Txn
	// Message is pgoutput.Message.
	Message = pgoutput.Message
	// DecodeError is pgoutput.DecodeError.
	DecodeError = pgoutput.DecodeError
	// Catalog is pgoutput.Catalog.
	Catalog = pgoutput.Catalog
	// CatalogColumn is pgoutput.CatalogColumn.
	CatalogColumn = pgoutput.CatalogColumn
	// CatalogType is pgoutput.CatalogType.
	CatalogType = pgoutput.CatalogType
	// CatalogAttribute is pgoutput.CatalogAttribute.
	CatalogAttribute = pgoutput.CatalogAttribute
)

// ErrDecoderClosed is pgoutput.ErrDecoderClosed, returned by
// Decoder.Decode after Decoder.Close. Test with errors.Is.
var ErrDecoderClosed = pgoutput.ErrDecoderClosed

// NewDecoder is pgoutput.NewDecoder.
func NewDecoder(cfg DecoderConfig) (*Decoder, error) { return pgoutput.NewDecoder(cfg) }
