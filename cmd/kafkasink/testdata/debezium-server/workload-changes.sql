-- The sample's workload, part 2: changes made once the snapshot is done.
-- The last statement writes the end marker the runs wait for.
\set ON_ERROR_STOP on
INSERT INTO inventory.customers VALUES (1003, 'Edward', 'Walker', 'ed@walker.com');
UPDATE inventory.customers SET email = 'sally@acme.com' WHERE id = 1001;
BEGIN;
INSERT INTO inventory.orders VALUES (10002, 1, 1003, 5);
INSERT INTO outside.secrets VALUES (2, 'still not captured');
UPDATE inventory.orders SET quantity = 3 WHERE order_number = 10001 AND line = 2;
COMMIT;
-- A key change: a delete (and its tombstone) under the old key, then an
-- insert under the new one.
UPDATE inventory.customers SET id = 1004 WHERE id = 1002;
DELETE FROM inventory.orders WHERE order_number = 10001 AND line = 1;
UPDATE inventory.products SET weight = 2.72;
INSERT INTO inventory.audit VALUES ('2024-01-02 03:04:06', 'changed');
INSERT INTO inventory.zz_end VALUES (1);
