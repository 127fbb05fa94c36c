-- Debezium conformance workload, part 1: the schema and the rows present
-- before the initial snapshot. Everything lives in schema dbzconf, dropped
-- and recreated here, so a run is repeatable. Part 2, applied once the
-- snapshot is complete, is workload-changes.sql. See README.md.
\set ON_ERROR_STOP on
DROP SCHEMA IF EXISTS dbzconf CASCADE;
CREATE SCHEMA dbzconf;

CREATE TYPE dbzconf.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN dbzconf.posint AS integer CHECK (VALUE > 0);
CREATE TYPE dbzconf.pair AS (a integer, b text);

-- Every type pgcdc converts, one column each (pgcdc/values.go), plus the
-- types it keeps as text that a Debezium consumer sees differently (an
-- extension's too: hstore, which scripts/testenv.sh creates in the test
-- database, since an extension is database-wide and the tests run this
-- workload in parallel schemas).
CREATE TABLE dbzconf.types (
    id           integer PRIMARY KEY,
    c_int2       smallint,
    c_int4       integer,
    c_int8       bigint,
    c_oid        oid,
    c_num_typmod numeric(12,3),
    c_num        numeric,
    c_num40      numeric(40,5),
    c_money      money,
    c_float4     real,
    c_float8     double precision,
    c_text       text,
    c_varchar    varchar(20),
    c_char       char(5),
    c_bytea      bytea,
    c_bool       boolean,
    c_date       date,
    c_time       time,
    c_time3      time(3),
    c_timetz     timetz,
    c_ts         timestamp,
    c_ts3        timestamp(3),
    c_tstz       timestamptz,
    c_interval   interval,
    c_uuid       uuid,
    c_json       json,
    c_jsonb      jsonb,
    c_inet       inet,
    c_cidr       cidr,
    c_macaddr    macaddr,
    c_bit1       bit(1),
    c_bit8       bit(8),
    c_varbit     varbit,
    c_point      point,
    c_enum       dbzconf.mood,
    c_domain     dbzconf.posint,
    c_int_arr    integer[],
    c_text_arr   text[],
    c_int_arr2d  integer[][],
    c_name       name,
    c_qchar      "char",
    c_num_arr    numeric[],
    c_date_arr   date[],
    c_pair       dbzconf.pair,
    c_hstore     hstore
);

-- insert_types inserts the five value sets used before the snapshot (ids
-- base+1 .. base+5) and again as streamed inserts (workload-changes.sql):
-- ordinary values, edge values, pre-epoch values, all NULL, and more edge
-- values (BC dates, -infinity, control characters, a 3-D array). The
-- hstores: 15 keys, one with a NULL value (more than 12, so Java's
-- HashMap, which orders Debezium's JSON object, has grown past its first
-- 16 buckets; Aa and BB have the same Java hash code), the empty hstore, keys and values needing JSON escapes
-- (a quote, a backslash, control characters, non-ASCII, a character
-- outside the BMP, U+2028), and NULL.
CREATE PROCEDURE dbzconf.insert_types(base integer) LANGUAGE sql AS $$
INSERT INTO dbzconf.types VALUES
 (base + 1, 32767, 2147483647, 9223372036854775807, 4000000000,
  12345.678, 3.14159, 12345678901234567890123456789012345.12345, 1234.56,
  1.5, -2.25e-300,
  'héllo wörld ✓ 𝄞 日本語', 'abc', 'ab', '\x00ff10', true,
  '2024-02-29', '13:45:59.123456', '13:45:59.123', '13:45:59.5+05:30',
  '2024-02-29 13:45:59.123456', '2024-02-29 13:45:59.123', '2024-02-29 13:45:59.123456+01',
  '1 year 2 mons 3 days 04:05:06.789', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '{"a": [1, 2.5, "x"], "b": null}', '{"b": 1, "a": "é"}',
  '192.168.1.5/24', '10.0.0.0/8', '08:00:2b:01:02:03',
  B'1', B'10101010', B'101', '(1.5,-2.25)', 'happy', 42,
  '{1,2,NULL,4}', '{"a b","c,d",NULL,"é"}', '{{1,2},{3,4}}',
  'a_name', 'x', '{1.5,NULL,-2}', '{2024-02-29,NULL}', '(1,one)',
  'a=>1, b=>NULL, c=>"", key=>value, "two words"=>"x y", k01=>v1, k02=>v2, k03=>v3, k04=>v4,
   k05=>v5, k06=>v6, longer_key_name=>"a longer value", z=>26, Aa=>1, BB=>2'),
 (base + 2, -32768, -2147483648, -9223372036854775808, 0,
  'NaN', 'Infinity', -0.00001, -92233720368547758.08,
  'NaN', 'Infinity', '', '', ' ', '\x', false,
  'infinity', '24:00:00', '00:00:00', '23:59:59.999999-08',
  '-infinity', 'infinity', 'infinity',
  '-1 days -00:00:01', '00000000-0000-0000-0000-000000000000',
  'null', 'null', '::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff',
  B'0', B'00000000', B'', '(0,0)', 'sad', 1,
  '{}', '{}', '{}',
  '', ' ', '{NaN}', '{infinity}', '(,)', ''),
 (base + 3, 0, 0, 0, 1,
  0, -1234567890123456789012345678901234567890.0123456789, 0, 0,
  '-Infinity', 'NaN', 'quote " backslash \ newline
tab	end', 'x', 'abcde', '\xdeadbeef', true,
  '1969-12-31', '00:00:00.000001', '23:59:59.999', '00:00:00+00',
  '1900-01-01 00:00:00.000001', '1969-12-31 23:59:59.999', '1900-01-01 00:00:00+00',
  '-178000000 years', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12',
  '[]', '{"nested": {"deep": [true, false, null]}}', '10.1.2.3', '10.1.2.0/24', '00:00:00:00:00:00',
  B'1', B'11111111', B'1111111111111111111', '(-1e+300,3.5)', 'ok', 2147483647,
  '{NULL}', '{""}', '{{NULL,2},{3,NULL}}',
  'name with spaces', 'z', '{}', '{}', '(-1,"quote""d")',
  hstore(ARRAY['quote "', 'back\slash', E'new\nline\ttab', E'ctl \x01\x1f\x7f', 'é ✓', '😀',
               E'sep \u2028', 'slash /', '=>', ''],
         ARRAY['"q"', '\', E'\r\n', E'\b\f', 'wörld', '𝄞', E'\u2029', '</', ',', NULL])),
 (base + 4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO dbzconf.types (id, c_num, c_float8, c_money, c_text, c_date, c_time, c_timetz, c_ts, c_tstz,
  c_interval, c_json, c_jsonb, c_text_arr, c_int_arr2d)
VALUES (base + 5, '-Infinity', '-Infinity', 92233720368547758.07, E'ctl \x01 emoji 😀',
  '0044-03-15 BC', '23:59:59.999999', '12:00:00+14', '0044-03-15 12:00:00 BC', '-infinity',
  '1 mon', '"\u00e9 \u0001"', '{"ctl": "\u0001\u001f", "emoji": "😀"}',
  '{"a\"b","c\\d"}', '{{{1,2}},{{3,4}}}')
$$;
CALL dbzconf.insert_types(0);

-- A TOASTed column left unchanged by an update (REPLICA IDENTITY DEFAULT).
-- 150 md5 digests: 4.8 kB of hex digits, which pglz cannot shrink below
-- the 2 kB TOAST threshold, so the value is stored out of line (checked
-- with pg_column_size and the unchanged-TOAST marker in the capture).
CREATE TABLE dbzconf.toasty (
    id   integer PRIMARY KEY,
    big  text,
    n    integer
);
INSERT INTO dbzconf.toasty
SELECT 1, string_agg(md5(i::text), ''), 1 FROM generate_series(1, 150) i;

-- Unchanged TOASTed columns of every type Debezium's
-- UnchangedToastedPlaceholder gives a placeholder of its own form (bytes,
-- a one-element text or uuid list, a list of the placeholder's bytes as
-- int or bigint, a one-element bytes list) and a jsonb, whose placeholder
-- is the string. Each value is over 8 kB of md5 digests (hex, or their
-- bytes and bits), which pglz cannot shrink below the 2 kB TOAST threshold,
-- so it is stored out of line and an update of n alone leaves it unchanged.
-- An hstore's placeholder is a map of the placeholder to itself, written
-- (hstore.handling.mode json) as that JSON object's text.
CREATE TABLE dbzconf.toast_types (
    id        integer PRIMARY KEY,
    t_bytea   bytea,
    t_text    text[],
    t_varchar varchar(40)[],
    t_jsonbs  jsonb[],
    t_int4    integer[],
    t_int8    bigint[],
    t_date    date[],
    t_uuid    uuid[],
    t_byteas  bytea[],
    t_jsonb   jsonb,
    t_hstore  hstore,
    n         integer
);
INSERT INTO dbzconf.toast_types
SELECT 1,
  (SELECT decode(string_agg(md5(i::text), ''), 'hex') FROM generate_series(1, 600) i),
  (SELECT array_agg(md5(i::text)) FROM generate_series(1, 300) i),
  (SELECT array_agg(md5(i::text)) FROM generate_series(301, 600) i),
  (SELECT array_agg(to_jsonb(md5(i::text))) FROM generate_series(601, 900) i),
  (SELECT array_agg(('x' || substr(md5(i::text), 1, 8))::bit(32)::integer) FROM generate_series(1, 3000) i),
  (SELECT array_agg(('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint) FROM generate_series(1, 1500) i),
  (SELECT array_agg(date '2000-01-01' + ('x' || substr(md5(i::text), 1, 4))::bit(16)::integer) FROM generate_series(1, 6000) i),
  (SELECT array_agg(md5(i::text)::uuid) FROM generate_series(901, 1500) i),
  (SELECT array_agg(decode(md5(i::text), 'hex')) FROM generate_series(1, 600) i),
  (SELECT jsonb_object_agg(md5(i::text), md5((-i)::text)) FROM generate_series(1, 200) i),
  (SELECT hstore(array_agg(md5((i + 1000)::text)), array_agg(md5((-i - 1000)::text))) FROM generate_series(1, 200) i),
  1;

-- REPLICA IDENTITY DEFAULT: update, primary-key change, delete.
CREATE TABLE dbzconf.ident_default (
    id    integer PRIMARY KEY,
    name  text,
    n     integer
);
INSERT INTO dbzconf.ident_default VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', 30);

-- REPLICA IDENTITY FULL with a primary key and a TOASTed column.
CREATE TABLE dbzconf.ident_full (
    id    integer PRIMARY KEY,
    name  text,
    big   text
);
ALTER TABLE dbzconf.ident_full REPLICA IDENTITY FULL;
INSERT INTO dbzconf.ident_full
SELECT i, 'full ' || i, (SELECT string_agg(md5((i * 10000 + j)::text), '') FROM generate_series(1, 150) j)
FROM generate_series(1, 3) i;

-- No primary key at all (REPLICA IDENTITY FULL so updates and deletes
-- replicate).
CREATE TABLE dbzconf.no_pk (
    a  integer,
    b  text
);
ALTER TABLE dbzconf.no_pk REPLICA IDENTITY FULL;
INSERT INTO dbzconf.no_pk VALUES (1, 'x'), (2, 'y');

-- A two-column primary key, declared in the other order than the columns.
CREATE TABLE dbzconf.multi_pk (
    a  text,
    b  integer,
    v  text,
    PRIMARY KEY (b, a)
);
INSERT INTO dbzconf.multi_pk VALUES ('k', 1, 'v1');

-- Truncated after the snapshot.
CREATE TABLE dbzconf.truncated (
    id  integer PRIMARY KEY,
    v   text
);
INSERT INTO dbzconf.truncated VALUES (1, 'a'), (2, 'b');

-- Column DEFAULTs (issue 9): Debezium declares a column's constant
-- default in its Connect schema, and Kafka Connect's JsonConverter
-- (replace.null.with.default) writes it in place of a NULL value. Kinds:
-- constants of several types, now(), a sequence (serial), DEFAULT NULL,
-- an expression, and a quote inside a string constant. The table name
-- sorts between ident_default and types, so Debezium's snapshot (in name
-- order) still begins and ends where it did. Columns defaulting to now()
-- are always given a value: the default differs run to run.
CREATE TABLE dbzconf.mixed_defaults (
    id        integer PRIMARY KEY,
    d_int     integer DEFAULT 42,
    d_int8    bigint DEFAULT -7,
    d_num     numeric(10,2) DEFAULT 1.50,
    d_float8  double precision DEFAULT 2.5,
    d_bool    boolean DEFAULT true,
    d_text    text DEFAULT 'hello',
    d_quote   varchar(10) DEFAULT 'x''y',
    d_date    date DEFAULT '2024-02-29',
    d_ts      timestamp DEFAULT '2024-02-29 13:45:59.123456',
    d_now     timestamptz DEFAULT now(),
    d_serial  serial,
    d_null    integer DEFAULT NULL,
    d_expr    integer DEFAULT (1 + 2),
    d_none    text
);
-- All defaults; then explicit NULLs in every defaulted column.
INSERT INTO dbzconf.mixed_defaults (id, d_now) VALUES (1, '2024-02-29 13:45:59.123456+00');
INSERT INTO dbzconf.mixed_defaults VALUES
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 100, NULL, NULL, NULL);

-- Trailing zeros and negative zeros (issue 30) of every numeric and
-- floating type, scalars and arrays: Debezium strips the trailing zeros
-- of an unconstrained numeric (variable scale) in decimal.handling.mode
-- precise and keeps a declared scale's; PostgreSQL stores a numeric -0 as
-- 0 but keeps the sign of a real's or a double's zero. REPLICA IDENTITY
-- FULL, so a streamed update and delete carry these values in their
-- before images too. Named to sort between ident_default and types, as
-- mixed_defaults. insert_zeros inserts its value sets before the
-- snapshot (ids 1..4) and again as streamed inserts (workload-changes.sql):
-- trailing zeros, negative zeros, more trailing zeros with NaN and
-- infinities beside -0, and all NULL.
CREATE TABLE dbzconf.num_zeros (
    id        integer PRIMARY KEY,
    n_var     numeric,
    n_scaled  numeric(12,4),
    n_int     numeric(10,0),
    f4        real,
    f8        double precision,
    a_var     numeric[],
    a_scaled  numeric(12,4)[],
    a_f4      real[],
    a_f8      double precision[]
);
ALTER TABLE dbzconf.num_zeros REPLICA IDENTITY FULL;
CREATE PROCEDURE dbzconf.insert_zeros(base integer) LANGUAGE sql AS $$
INSERT INTO dbzconf.num_zeros VALUES
 (base + 1, 3.14159265358979323846264338327950288419716939937510, 1.5, 100, 1.50, 100.0,
  '{1.50,100,1000.000,0.00100,-2.500,0.00000000000000000001000,NULL}', '{1.5,NULL,-2.25}',
  '{1.50,100.0}', '{1.50,100.0,NULL}'),
 (base + 2, '-0.000', '-0', '-0', '-0', '-0.0',
  '{-0,-0.00,0.000}', '{-0,0}', '{-0,0,-0.0,NULL}', '{-0,NULL,0,-0.0}'),
 (base + 3, 1000.000, -12345678.9000, 0, 'NaN', '-Infinity',
  '{0.000}', '{100}', '{NaN,-0,Infinity}', '{-Infinity,NaN,-0}'),
 (base + 4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
$$;
CALL dbzconf.insert_zeros(0);

-- Arrays of types whose arrays Debezium leaves out of its records
-- (issue 9): money[], interval[], varbit[], point[], xml[] and an array
-- of a domain. Named to sort between ident_default and types, as
-- mixed_defaults.
CREATE TABLE dbzconf.rare_arrays (
    id          integer PRIMARY KEY,
    a_money     money[],
    a_interval  interval[],
    a_varbit    varbit[],
    a_point     point[],
    a_xml       xml[],
    a_domain    dbzconf.posint[],
    n           integer
);
INSERT INTO dbzconf.rare_arrays VALUES
 (1, '{1.5,NULL}', '{"1 day",NULL}', '{101,NULL}', '{"(1,2)",NULL}', ARRAY['<a>1</a>'::xml, NULL],
  '{7,NULL}', 1),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, 2);

-- The capture ends at the first record of this table: the last statement
-- of workload-changes.sql inserts its only row.
CREATE TABLE dbzconf.zz_end (
    id  integer PRIMARY KEY
);
