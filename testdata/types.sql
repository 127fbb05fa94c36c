-- The table of every type pgcdc supports, with one row of them and an
-- update: the SQL of pgcdc's TestTypesRoundTripGolden and kafkasinkavro's
-- TestTypesRoundTrip, read by kafkasinktest/pgtest.LoadTypesSQL, so the two
-- tests stream the same row and cannot drift apart.
--
-- Each "-- step:" line starts a step a test runs as one statement list
-- (one transaction). {table}, {mood} and {posint} are replaced with the
-- test's own names: objects on the shared server have unique names.
--
-- num_small is a numeric(12,2) whose value fits an int64 (kafkasinkavro's
-- short decimal path), and big is NOT NULL (kafkasinkavro writes an
-- unchanged TOAST value of a NOT NULL column as its type's zero value):
-- the pgcdc golden file has them as any other column.

-- step: setup
CREATE TYPE {mood} AS ENUM ('sad', 'happy');
CREATE DOMAIN {posint} AS integer CHECK (VALUE > 0);
CREATE TABLE {table} (
	row_id int PRIMARY KEY,
	i2 smallint, i4 integer, i8 bigint, o oid,
	f4 real, f8 double precision, f8_nan double precision, f8_inf double precision, f8_ninf double precision,
	num numeric, num_big numeric(40,10), num_nan numeric, num_small numeric(12,2),
	b boolean, t text, vc varchar(20), bp char(5), nm name,
	u uuid, j json, jb jsonb, by bytea,
	d date, d_inf date, ts timestamp, ts_inf timestamp, tstz timestamptz, tm time, tmtz timetz, iv interval,
	a_int int[], a_text text[], a_2d int[][], a_null int[],
	mood {mood}, pos {posint}, ip inet, pt point,
	nothing text, big text NOT NULL
);
-- Out of line and uncompressed, so an update that does not touch it
-- sends it as an unchanged TOAST value.
ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL;

-- step: insert
SET TIME ZONE 'Europe/Paris';
INSERT INTO {table} VALUES (
	1,
	-32768, 2147483647, 9223372036854775807, 4294967295,
	1.5, 0.1, 'NaN', 'Infinity', '-Infinity',
	'12345678901234567890.000000000000000001', 1234567890.0123456789, 'NaN', -1234.5,
	true, 'Grüße, "quotes" \ and |pipes|', 'varchar', 'ab', 'a_name',
	'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"b": 1, "a": [true, null]}', '{"b": 1, "a": [true, null]}', '\x00ff10',
	'2024-02-29', 'infinity', '2024-02-29 13:14:15.123456', '-infinity', '2024-02-29 13:14:15.5+01', '13:14:15', '13:14:15+02', '1 year 2 mons 3 days 04:05:06.5',
	'{1,2,NULL,4}', '{"a","b,c",NULL,"d\"e"}', '{{1,2},{3,4}}', NULL,
	'happy', 7, '192.168.0.1/24', '(1.5,-2)',
	NULL, repeat('x', 3000)
);

-- step: update
-- big is TOASTed; this update does not touch it.
UPDATE {table} SET t = 'changed' WHERE row_id = 1;

-- step: drop
DROP TABLE IF EXISTS {table};
DROP TYPE IF EXISTS {mood};
DROP DOMAIN IF EXISTS {posint};
