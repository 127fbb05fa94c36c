-- The outbox workload (issue 29): a Debezium-style outbox table, created
-- after the snapshot, and rows the EventRouter routes: text and jsonb
-- payloads, a NULL and an empty payload, a number key, a row updated
-- (Debezium warns and skips it) and rows deleted (skipped), in one
-- transaction and in several. Run by the outbox-router configuration
-- (configs/outbox-router.properties) instead of workload-changes.sql, and
-- by pgcdc's TestEventRouterConformance through Run.
CREATE TABLE dbzconf.outbox (
    id            uuid PRIMARY KEY,
    aggregatetype text NOT NULL,
    aggregateid   text NOT NULL,
    type          text NOT NULL,
    payload       jsonb
);
CREATE TABLE dbzconf.outbox_text (
    id            bigint PRIMARY KEY,
    aggregatetype text NOT NULL,
    aggregateid   bigint NOT NULL,
    type          text NOT NULL,
    payload       text
);
BEGIN;
INSERT INTO dbzconf.outbox VALUES ('4d47e190-0402-4048-bc2c-89dd54343cdc', 'Order', '1', 'OrderCreated',
  '{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "quantity": 2, "totalPrice": 39.98}], "customerId": 123}');
DELETE FROM dbzconf.outbox WHERE id = '4d47e190-0402-4048-bc2c-89dd54343cdc';
INSERT INTO dbzconf.outbox VALUES ('5e58f2a1-0402-4048-bc2c-89dd54343cdc', 'Order', '1', 'OrderPaid', '{"id": 1, "state": "paid", "nested": {"a": [true, null, "x"]}}');
COMMIT;
INSERT INTO dbzconf.outbox VALUES ('6f69a3b2-0402-4048-bc2c-89dd54343cdc', 'Customer', '7', 'CustomerDeleted', NULL);
INSERT INTO dbzconf.outbox VALUES ('7a7ab4c3-0402-4048-bc2c-89dd54343cdc', 'Customer', 'ü-8', 'CustomerMoved', '"just a string"');
UPDATE dbzconf.outbox SET type = 'changed' WHERE id = '7a7ab4c3-0402-4048-bc2c-89dd54343cdc';
INSERT INTO dbzconf.outbox_text VALUES (1, 'Invoice', 42, 'InvoiceSent', '{"invoice": 42, "total": "12.50"}');
INSERT INTO dbzconf.outbox_text VALUES (2, 'Invoice', 43, 'InvoiceEmpty', '');
INSERT INTO dbzconf.outbox_text VALUES (3, 'Invoice', 44, 'InvoiceText', 'plain text, not JSON');
DELETE FROM dbzconf.outbox_text WHERE id = 3;

-- The end marker: the capture stops at this record.
INSERT INTO dbzconf.zz_end VALUES (1);
