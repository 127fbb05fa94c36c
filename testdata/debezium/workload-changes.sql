-- Debezium conformance workload, part 2: the changes applied after the
-- initial snapshot of workload.sql is complete. See README.md.
\set ON_ERROR_STOP on

-- Streamed inserts of every value set (ids 11..14), one transaction.
CALL dbzconf.insert_types(10);

-- Updates of ordinary rows and one to all-NULL values.
UPDATE dbzconf.types SET c_text = 'updated', c_int4 = 7 WHERE id = 11;
UPDATE dbzconf.types SET (c_num, c_jsonb, c_int_arr) = (NULL, NULL, NULL) WHERE id = 12;

-- An update that leaves the TOASTed column unchanged, then one that
-- changes it, then a delete.
UPDATE dbzconf.toasty SET n = 2 WHERE id = 1;
UPDATE dbzconf.toasty SET big = 'small now', n = 3 WHERE id = 1;
DELETE FROM dbzconf.toasty WHERE id = 1;

-- An update that leaves every TOASTed column of toast_types unchanged.
UPDATE dbzconf.toast_types SET n = 2 WHERE id = 1;

-- REPLICA IDENTITY DEFAULT: an update, a primary-key change, deletes, in
-- one transaction.
BEGIN;
UPDATE dbzconf.ident_default SET name = 'uno' WHERE id = 1;
UPDATE dbzconf.ident_default SET id = 10 WHERE id = 2;
DELETE FROM dbzconf.ident_default WHERE id = 3;
COMMIT;
DELETE FROM dbzconf.ident_default WHERE id = 1;

-- REPLICA IDENTITY FULL: an update leaving the TOASTed column unchanged, a
-- primary-key change, a delete.
UPDATE dbzconf.ident_full SET name = 'full one' WHERE id = 1;
UPDATE dbzconf.ident_full SET id = 20 WHERE id = 2;
DELETE FROM dbzconf.ident_full WHERE id = 3;

-- No primary key.
INSERT INTO dbzconf.no_pk VALUES (3, 'z');
UPDATE dbzconf.no_pk SET b = 'xx' WHERE a = 1;
DELETE FROM dbzconf.no_pk WHERE a = 2;

-- Two-column key: an update and a key change.
UPDATE dbzconf.multi_pk SET v = 'v2' WHERE a = 'k' AND b = 1;
UPDATE dbzconf.multi_pk SET b = 2 WHERE a = 'k' AND b = 1;

-- TRUNCATE, then a row in the emptied table.
TRUNCATE dbzconf.truncated;
INSERT INTO dbzconf.truncated VALUES (3, 'c');

-- Column DEFAULTs: streamed inserts with all defaults and with explicit
-- NULLs, an update to NULL, and deletes (REPLICA IDENTITY DEFAULT: the
-- before image has NULL in every non-key column).
INSERT INTO dbzconf.mixed_defaults (id, d_now) VALUES (11, '2024-02-29 13:45:59.123456+00');
INSERT INTO dbzconf.mixed_defaults VALUES
 (12, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 200, NULL, NULL, NULL);
UPDATE dbzconf.mixed_defaults SET d_int = NULL, d_text = NULL, d_date = NULL, d_none = 'set' WHERE id = 11;
DELETE FROM dbzconf.mixed_defaults WHERE id = 1;

-- Arrays Debezium leaves out: a streamed insert, an update, a delete.
INSERT INTO dbzconf.rare_arrays VALUES
 (11, '{-2.25}', '{"1 year 2 mons",-00:00:01}', '{"",1111}', '{"(0,0)"}', ARRAY['<b/>'::xml],
  '{1,2}', 11);
UPDATE dbzconf.rare_arrays SET a_money = '{3}', n = 12 WHERE id = 11;
DELETE FROM dbzconf.rare_arrays WHERE id = 2;

-- Trailing and negative zeros: streamed inserts of every value set (ids
-- 11..14), an update to negative zeros and a delete of the negative-zero
-- row (REPLICA IDENTITY FULL: both carry the old values).
CALL dbzconf.insert_zeros(10);
UPDATE dbzconf.num_zeros SET (n_var, n_scaled, f4, f8, a_var, a_f4, a_f8) =
  ('-0.0', '-0.00', '-0', '-0', '{-0.0}', '{-0}', '{-0}') WHERE id = 11;
DELETE FROM dbzconf.num_zeros WHERE id = 12;

-- The end marker: the capture stops at this record.
INSERT INTO dbzconf.zz_end VALUES (1);
