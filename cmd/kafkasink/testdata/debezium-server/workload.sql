-- The sample's workload, part 1: the schema and the rows present before
-- the snapshot. Schema inventory is captured (schema.include.list);
-- schema outside is not. Dropped and recreated, so a run is repeatable.
\set ON_ERROR_STOP on
DROP SCHEMA IF EXISTS inventory CASCADE;
DROP SCHEMA IF EXISTS outside CASCADE;
CREATE SCHEMA inventory;
CREATE SCHEMA outside;

CREATE TABLE inventory.customers (id integer PRIMARY KEY, first_name text, last_name text, email text);
CREATE TABLE inventory.orders (order_number integer, line smallint, purchaser integer, quantity integer, PRIMARY KEY (order_number, line));
CREATE TABLE inventory.products (id uuid PRIMARY KEY, name varchar(255), weight numeric(6,2));
-- No primary key: Debezium writes its records with a null key.
CREATE TABLE inventory.audit (at timestamp, what text);
CREATE TABLE inventory.zz_end (id integer PRIMARY KEY);
CREATE TABLE outside.secrets (id integer PRIMARY KEY, secret text);

INSERT INTO inventory.customers VALUES (1001, 'Sally', 'Thomas', 'sally.thomas@acme.com'), (1002, 'George', 'Bailey', 'gbailey@foobar.com');
INSERT INTO inventory.orders VALUES (10001, 1, 1001, 1), (10001, 2, 1002, 2);
INSERT INTO inventory.products VALUES ('8d1f6b1e-3c4a-4f6e-9a55-0d7f1c2b3a01', 'scooter', 3.14);
INSERT INTO inventory.audit VALUES ('2024-01-02 03:04:05', 'seeded');
INSERT INTO outside.secrets VALUES (1, 'not captured');
