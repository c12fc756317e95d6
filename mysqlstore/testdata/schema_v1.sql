-- leash mysqlstore schema, version 1, for MySQL 8.0.4+ and MariaDB 10.6+ (InnoDB).
--
-- Store.Migrate applies this very file (it is embedded in the package). A DBA
-- who applies it by hand runs it with the mysql or mariadb client, in the
-- database the store will use:
--
--     mariadb --database=app < schema.sql
--
-- The script drops and creates again the procedures of leash's names
-- (DROP PROCEDURE IF EXISTS): applied by hand, check first that no
-- procedure of those names is another application's. Migrate checks it and
-- refuses (ErrNotLeashProcedure): leash's procedures carry the comment
-- 'leash: … (github.com/leash-go/leash/mysqlstore)'.
--
-- For a table name other than leash_locks (Options.Table), replace every
-- leash_locks that starts an identifier below with the chosen name: the
-- companion tables and the procedures are named after the table.
--
-- Times are microseconds since 1970-01-01 UTC by the server's clock, computed
-- as TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)): pure
-- arithmetic on the UTC wall time, so neither the session's time_zone nor the
-- client's loc/parseTime settings can move a lease. A procedure reads the
-- time once, at its start (UTC_TIMESTAMP, like NOW, is a statement's start
-- time; SYSDATE would be the moment of evaluation, later, and differ from
-- one use to the next): that is after the client sent the call, so a lease
-- counted from it ends no earlier than one counted from the send; and a
-- call that waited for a row lock judges leases by its start, which only
-- ever makes a lock look held longer, never free sooner.
--
-- The procedures run every multi-statement transaction server-side: one CALL
-- holds row locks only while the server runs it, never while waiting for the
-- client, so a client paused (SIGSTOP) or cut off mid-call cannot keep a
-- name locked. Each returns its one-row result after COMMIT.
--
-- Deadlocks: every transaction runs at READ COMMITTED (set for that
-- transaction only, whatever the session's level), where InnoDB takes no
-- gap or next-key locks, only locks on the rows a statement reads to change
-- (under REPEATABLE READ, two inserts into one gap that both hold a
-- next-key lock on the row after it deadlock). It locks rows of leash_locks
-- (the names' rows) before rows of leash_locks_holders, and within each
-- table in ascending primary key order (names sorted as bytes). Every read
-- that decides is a locking read (FOR UPDATE) or comes after the lock of the
-- name's row, under which alone the name's holder rows change. Every
-- acquire deletes the name's expired holder rows before it decides, so that
-- a renewal that started before a lease ended cannot revive it after
-- another owner was granted the name. READ COMMITTED needs row-based
-- binary logging (binlog_format ROW or MIXED, the defaults of MySQL 8 and
-- MariaDB) where the binary log is on.

-- One row per name ever locked. The row stays when the lock is freed (owner
-- NULL): it keeps the name's fencing counter, so tokens never go back.
CREATE TABLE IF NOT EXISTS `leash_locks` (
  `name`        VARBINARY(512)   NOT NULL            COMMENT 'lock name, bytes as the user named it',
  `kind`        TINYINT UNSIGNED NOT NULL DEFAULT 0  COMMENT '0: a lock (Mutex, FairMutex, RWMutex); 4: a semaphore',
  `owner`       VARBINARY(255)   NULL                COMMENT 'exclusive holder "<client-id>:<n>", NULL when none',
  `write`       TINYINT UNSIGNED NOT NULL DEFAULT 0  COMMENT '1 when the exclusive holder is an RWMutex writer',
  `expires_us`  BIGINT           NOT NULL DEFAULT 0  COMMENT 'exclusive lease end, µs since the epoch (UTC, server clock)',
  `owner_fence` BIGINT           NOT NULL DEFAULT 0  COMMENT 'the exclusive holder''s fencing token',
  `fence`       BIGINT           NOT NULL DEFAULT 0  COMMENT 'last fencing token granted on the name, of any kind; only grows',
  `permits`     INT              NOT NULL DEFAULT 0  COMMENT 'a semaphore''s permit count',
  PRIMARY KEY (`name`)
) ENGINE=InnoDB COMMENT='leash locks (github.com/leash-go/leash/mysqlstore)';

-- The shared and waiting parts of a name: RWMutex readers, semaphore
-- permits, fair queue places and waiting writers' marks, each with its own
-- lease.
CREATE TABLE IF NOT EXISTS `leash_locks_holders` (
  `name`       VARBINARY(512)   NOT NULL COMMENT 'lock name',
  `owner`      VARBINARY(255)   NOT NULL COMMENT 'owner "<client-id>:<n>"',
  `role`       TINYINT UNSIGNED NOT NULL COMMENT '1 fair queue place, 2 reader, 3 waiting writer, 4 permit',
  `expires_us` BIGINT           NOT NULL COMMENT 'lease (or place) end, µs since the epoch',
  `fence`      BIGINT           NOT NULL COMMENT 'a reader''s or permit''s token; a place''s arrival number',
  PRIMARY KEY (`name`, `owner`, `role`)
) ENGINE=InnoDB COMMENT='leash lock holders and waiters (github.com/leash-go/leash/mysqlstore)';

-- Holder records (driver.ClientRecorder): who holds what, for operators. A
-- record is JSON written by the store; the locks never depend on it.
CREATE TABLE IF NOT EXISTS `leash_locks_clients` (
  `id`         VARBINARY(64) NOT NULL COMMENT 'client id, the first part of its owners',
  `record`     BLOB          NOT NULL COMMENT 'the record, JSON',
  `expires_us` BIGINT        NOT NULL COMMENT 'record end, µs since the epoch (UTC, server clock)',
  PRIMARY KEY (`id`),
  KEY `expires` (`expires_us`)
) ENGINE=InnoDB COMMENT='leash holder records (github.com/leash-go/leash/mysqlstore)';

-- Who waits: one row per Store (a process's client) that polls a name for
-- its waiters, refreshed while it polls, so that operators can see how many
-- clients wait for a lock (Info.Waiters).
CREATE TABLE IF NOT EXISTS `leash_locks_waiters` (
  `name`       VARBINARY(512) NOT NULL COMMENT 'lock name',
  `store`      VARBINARY(32)  NOT NULL COMMENT 'the waiting Store''s random id',
  `expires_us` BIGINT         NOT NULL COMMENT 'end of the registration, µs since the epoch',
  PRIMARY KEY (`name`, `store`)
) ENGINE=InnoDB COMMENT='leash waiting clients (github.com/leash-go/leash/mysqlstore)';

-- The schema's version, so that a later leash can migrate it, and the mark
-- that tells leash's tables from another application's tables of those names.
CREATE TABLE IF NOT EXISTS `leash_locks_schema` (
  `app`     VARCHAR(16) NOT NULL,
  `version` INT         NOT NULL,
  PRIMARY KEY (`app`)
) ENGINE=InnoDB COMMENT='leash schema version (github.com/leash-go/leash/mysqlstore)';

DELIMITER //

-- leash_locks_open: the first step of every transaction on one name: lock
-- its row (creating it when p_create) and drop what expired at p_now: the
-- holder rows, and the exclusive holder (of a row of a kind it knows: 0 or
-- 4). Returns the row's state; o_found is 0 when there is no row (and
-- p_create is 0).
DROP PROCEDURE IF EXISTS `leash_locks_open`//
CREATE PROCEDURE `leash_locks_open`(IN p_name VARBINARY(512), IN p_now BIGINT, IN p_create INT,
    OUT o_found INT, OUT o_kind INT, OUT o_owner VARBINARY(255), OUT o_write INT, OUT o_exp BIGINT,
    OUT o_owner_fence BIGINT, OUT o_fence BIGINT, OUT o_permits INT)
  MODIFIES SQL DATA
  COMMENT 'leash: lock a name''s row (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET o_found = 0;
  SET o_found = 1;
  IF p_create THEN
    -- ON DUPLICATE KEY takes an exclusive lock on an existing row at once,
    -- so two callers never both hold a shared lock they then want to
    -- upgrade (InnoDB's classic insert deadlock).
    INSERT INTO `leash_locks` (`name`) VALUES (p_name) ON DUPLICATE KEY UPDATE `name` = `name`;
  END IF;
  SELECT `kind`, `owner`, `write`, `expires_us`, `owner_fence`, `fence`, `permits`
    INTO o_kind, o_owner, o_write, o_exp, o_owner_fence, o_fence, o_permits
    FROM `leash_locks` WHERE `name` = p_name FOR UPDATE;
  IF o_found AND o_kind IN (0, 4) THEN
    DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `expires_us` <= p_now;
    IF o_owner IS NOT NULL AND o_exp <= p_now THEN
      UPDATE `leash_locks` SET `owner` = NULL, `write` = 0, `expires_us` = 0 WHERE `name` = p_name;
      SET o_owner = NULL, o_write = 0, o_exp = 0;
    END IF;
  END IF;
END//

-- leash_locks_acquire: take p_name for p_owner. p_kind is the lock kind: 0
-- mutex, 1 fair, 2 read, 3 write, 4 permit (leash's driver.Kind); p_parent
-- is a downgrading writer's owner (read), p_wait_us how long a waiting place
-- lasts (fair, write; 0 takes none), p_permits a new semaphore's count.
-- Returns one row: granted (0/1), fence (the grant's token; when refused,
-- the name's last token, which tells a poller of later grants), remaining_us
-- (when refused: until the blocking lease or place ends), refusal (0 none,
-- 1 the name is a semaphore, 2 the name is a lock, not a semaphore, 3 an
-- upgrade: the owner reads), held (1 when refused because holders hold the
-- name, not only because of a waiting place or mark), kind (the name's).
-- A name of the other kind (a lock's for a permit, a semaphore's for a
-- lock) that nothing holds, waits for or queues for switches kind here,
-- keeping its fencing counter; while anything of its kind is live the call
-- is refused (1 or 2).
DROP PROCEDURE IF EXISTS `leash_locks_acquire`//
CREATE PROCEDURE `leash_locks_acquire`(IN p_kind INT, IN p_name VARBINARY(512), IN p_owner VARBINARY(255),
    IN p_parent VARBINARY(255), IN p_lease_us BIGINT, IN p_wait_us BIGINT, IN p_permits INT)
  MODIFIES SQL DATA
  COMMENT 'leash: take a lock (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence BIGINT;
  DECLARE v_granted, v_refusal, v_count, v_held INT DEFAULT 0;
  DECLARE v_token, v_until BIGINT DEFAULT 0;
  DECLARE v_mine BIGINT DEFAULT NULL;
  DECLARE v_head VARBINARY(255) DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  CALL `leash_locks_open`(p_name, v_now, 1, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
  IF v_kind IN (0, 4) AND (p_kind = 4) <> (v_kind = 4) THEN
    -- The other kind: the name switches kind if it is free (no exclusive
    -- holder, and no reader, permit, place or mark: the expired ones are
    -- gone), keeping its fencing counter; refused while anything of the
    -- other kind is live.
    IF v_owner IS NOT NULL OR EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name FOR UPDATE) THEN
      SET v_refusal = IF(p_kind = 4, 2, 1);
    ELSE
      SET v_kind = IF(p_kind = 4, 4, 0), v_permits = IF(p_kind = 4, p_permits, 0);
      UPDATE `leash_locks` SET `kind` = v_kind, `permits` = v_permits WHERE `name` = p_name;
    END IF;
  END IF;
  IF v_refusal <> 0 THEN
    DO 0; -- refused above
  ELSEIF p_kind = 4 THEN
    IF v_kind <> 4 THEN
      SET v_refusal = 2;
    ELSE
      SELECT MAX(`fence`) INTO v_mine FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 4 FOR UPDATE;
      SELECT COUNT(*), COALESCE(MIN(`expires_us`), 0) INTO v_count, v_until
        FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 4 FOR UPDATE;
      IF v_mine IS NOT NULL THEN
        SET v_granted = 1, v_token = v_mine;
        UPDATE `leash_locks_holders` SET `expires_us` = v_now + p_lease_us WHERE `name` = p_name AND `owner` = p_owner AND `role` = 4;
      ELSEIF v_count < v_permits THEN
        SET v_granted = 1, v_fence = GREATEST(v_fence + 1, v_now), v_token = v_fence;
        INSERT INTO `leash_locks_holders` (`name`, `owner`, `role`, `expires_us`, `fence`) VALUES (p_name, p_owner, 4, v_now + p_lease_us, v_token);
        UPDATE `leash_locks` SET `fence` = v_fence WHERE `name` = p_name;
      ELSE
        SET v_held = 1;
      END IF;
    END IF;
  ELSEIF v_kind <> 0 THEN
    SET v_refusal = 1;
  ELSEIF p_kind <> 2 AND v_owner = p_owner THEN
    -- A retry of a granted exclusive acquire: the same tenure, its lease refreshed.
    SET v_granted = 1, v_token = v_owner_fence;
    UPDATE `leash_locks` SET `expires_us` = v_now + p_lease_us WHERE `name` = p_name;
  ELSE
    -- What blocks: the exclusive holder's lease, or the latest reader's.
    SELECT COUNT(*), COALESCE(MAX(`expires_us`), 0) INTO v_count, v_until
      FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 2 FOR UPDATE;
    IF v_owner IS NOT NULL THEN
      SET v_until = v_exp;
    END IF;
    SET v_held = v_until > 0;
    IF p_kind = 0 THEN
      IF v_until = 0 THEN
        SET v_granted = 1;
      END IF;
    ELSEIF p_kind = 1 THEN
      SELECT `owner` INTO v_head FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 1 ORDER BY `fence` LIMIT 1 FOR UPDATE;
      IF v_until = 0 AND (v_head IS NULL OR v_head = p_owner) THEN
        SET v_granted = 1;
        DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 1;
      ELSE
        IF p_wait_us > 0 THEN
          SELECT COALESCE(MAX(`fence`), 0) + 1 INTO v_mine FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 1 FOR UPDATE;
          INSERT INTO `leash_locks_holders` (`name`, `owner`, `role`, `expires_us`, `fence`) VALUES (p_name, p_owner, 1, v_now + p_wait_us, v_mine)
            ON DUPLICATE KEY UPDATE `expires_us` = v_now + p_wait_us;
          IF v_head IS NULL THEN
            SET v_head = p_owner;
          END IF;
        END IF;
        IF v_until = 0 THEN
          -- Free, but another waiter is first: until its place ends.
          SELECT `expires_us` INTO v_until FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = v_head AND `role` = 1 FOR UPDATE;
        END IF;
      END IF;
    ELSEIF p_kind = 2 THEN
      SELECT MAX(`fence`) INTO v_mine FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 2 FOR UPDATE;
      IF v_mine IS NOT NULL THEN
        -- A retry of a granted read: its lease refreshed.
        SET v_granted = 1, v_token = v_mine;
        UPDATE `leash_locks_holders` SET `expires_us` = v_now + p_lease_us WHERE `name` = p_name AND `owner` = p_owner AND `role` = 2;
      ELSEIF v_owner IS NOT NULL AND NOT (v_write = 1 AND p_parent <> '' AND v_owner = p_parent) THEN
        SET v_until = v_exp;
      ELSE
        SELECT COALESCE(MIN(`expires_us`), 0) INTO v_until FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 3 FOR UPDATE;
        IF v_until = 0 OR v_owner IS NOT NULL THEN
          -- No writer waits, or this is the writer's own downgrade.
          SET v_granted = 1, v_fence = GREATEST(v_fence + 1, v_now), v_token = v_fence;
          INSERT INTO `leash_locks_holders` (`name`, `owner`, `role`, `expires_us`, `fence`) VALUES (p_name, p_owner, 2, v_now + p_lease_us, v_token);
          UPDATE `leash_locks` SET `fence` = v_fence WHERE `name` = p_name;
        END IF;
      END IF;
    ELSEIF p_kind = 3 THEN
      IF EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 2 FOR UPDATE) THEN
        SET v_refusal = 3;
      ELSEIF v_until = 0 THEN
        SET v_granted = 1;
        DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 3;
      ELSEIF p_wait_us > 0 THEN
        INSERT INTO `leash_locks_holders` (`name`, `owner`, `role`, `expires_us`, `fence`) VALUES (p_name, p_owner, 3, v_now + p_wait_us, 0)
          ON DUPLICATE KEY UPDATE `expires_us` = v_now + p_wait_us;
      END IF;
    END IF;
    IF v_granted = 1 AND p_kind <> 2 THEN
      SET v_fence = GREATEST(v_fence + 1, v_now), v_token = v_fence;
      UPDATE `leash_locks` SET `owner` = p_owner, `write` = (p_kind = 3), `expires_us` = v_now + p_lease_us,
          `owner_fence` = v_fence, `fence` = v_fence
        WHERE `name` = p_name;
    END IF;
  END IF;
  COMMIT;
  SELECT v_granted AS granted, IF(v_granted = 1, v_token, v_fence) AS fence, IF(v_granted = 1 OR v_until = 0, -1, v_until - v_now) AS remaining_us,
    v_refusal AS refusal, v_held AND NOT v_granted AS held, v_kind AS kind;
END//

-- leash_locks_release: drop p_owner's lock of kind p_kind (as in
-- leash_locks_acquire) on p_name. Returns one row: released (0/1), refusal
-- (1: the name is a semaphore with live permits; 2: it is a lock, not a
-- semaphore, held, queued for or waited for; a free name of the other kind
-- is just not held: 0), kind (the name's), and whom
-- the release lets in, for the store's own waiters: wake_kind (the kind of
-- lock whose waiters to wake, -1 none), wake_to (leash's driver.Waking) and
-- wake_head (the fair queue's head, for wake_to 4).
DROP PROCEDURE IF EXISTS `leash_locks_release`//
CREATE PROCEDURE `leash_locks_release`(IN p_kind INT, IN p_name VARBINARY(512), IN p_owner VARBINARY(255))
  MODIFIES SQL DATA
  COMMENT 'leash: release a lock (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence BIGINT;
  DECLARE v_released, v_refusal, v_rows INT DEFAULT 0;
  DECLARE v_wake_kind, v_wake_to INT DEFAULT -1;
  DECLARE v_head VARBINARY(255) DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  CALL `leash_locks_open`(p_name, v_now, 0, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
  IF v_found = 0 THEN
    SET v_released = 0;
  ELSEIF v_kind NOT IN (0, 4) THEN
    SET v_refusal = IF(p_kind = 4, 2, 1);
  ELSEIF (p_kind = 4) <> (v_kind = 4) THEN
    -- Not held: the name is the other kind. Refused as such only while
    -- something of that kind is live on it.
    IF v_owner IS NOT NULL OR EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name FOR UPDATE) THEN
      SET v_refusal = IF(p_kind = 4, 2, 1);
    END IF;
  ELSEIF p_kind = 2 OR p_kind = 4 THEN
    DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = p_kind;
    SET v_released = ROW_COUNT() > 0;
    IF v_released AND p_kind = 4 THEN
      SET v_wake_kind = 4, v_wake_to = 1;
    ELSEIF v_released AND NOT EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 2 FOR UPDATE)
        AND EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 3 FOR UPDATE) THEN
      SET v_wake_kind = 3, v_wake_to = 3;
    END IF;
  ELSEIF v_owner = p_owner THEN
    SET v_released = 1;
    UPDATE `leash_locks` SET `owner` = NULL, `write` = 0, `expires_us` = 0 WHERE `name` = p_name;
    IF v_write = 1 THEN
      SET v_wake_kind = 3,
        v_wake_to = IF(EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 3 FOR UPDATE), 3, 2);
    ELSE
      SELECT `owner` INTO v_head FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 1 ORDER BY `fence` LIMIT 1 FOR UPDATE;
      IF v_head IS NOT NULL THEN
        SET v_wake_kind = 1, v_wake_to = 4;
      ELSE
        SET v_wake_kind = 0, v_wake_to = 1;
      END IF;
    END IF;
  END IF;
  COMMIT;
  SELECT v_released AS released, v_refusal AS refusal, v_wake_kind AS wake_kind, v_wake_to AS wake_to,
    COALESCE(v_head, '') AS wake_head, COALESCE(v_kind, 0) AS kind;
END//

-- leash_locks_withdraw: remove p_owner's fair queue place and waiting-writer
-- mark on p_name. Returns one row: fair_head (the queue's new head when the
-- owner was the head of a free lock's queue, '' otherwise) and wake_readers
-- (1 when the last writer's mark left a lock no writer holds).
DROP PROCEDURE IF EXISTS `leash_locks_withdraw`//
CREATE PROCEDURE `leash_locks_withdraw`(IN p_name VARBINARY(512), IN p_owner VARBINARY(255))
  MODIFIES SQL DATA
  COMMENT 'leash: leave a queue (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence BIGINT;
  DECLARE v_head VARBINARY(255) DEFAULT NULL;
  DECLARE v_new_head VARBINARY(255) DEFAULT NULL;
  DECLARE v_readers INT DEFAULT 0;
  DECLARE v_marked INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  CALL `leash_locks_open`(p_name, v_now, 0, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
  IF v_found AND v_kind IN (0, 4) THEN
    SELECT `owner` INTO v_head FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 1 ORDER BY `fence` LIMIT 1 FOR UPDATE;
    DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 1;
    SELECT COUNT(*) INTO v_readers FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 2 FOR UPDATE;
    IF v_head = p_owner AND v_owner IS NULL AND v_readers = 0 THEN
      SELECT `owner` INTO v_new_head FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 1 ORDER BY `fence` LIMIT 1 FOR UPDATE;
    END IF;
    DELETE FROM `leash_locks_holders` WHERE `name` = p_name AND `owner` = p_owner AND `role` = 3;
    SET v_marked = ROW_COUNT() > 0;
    IF v_marked THEN
      SET v_marked = v_owner IS NULL AND NOT EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name AND `role` = 3 FOR UPDATE);
    END IF;
  END IF;
  COMMIT;
  SELECT COALESCE(v_new_head, '') AS fair_head, v_marked AS wake_readers;
END//

-- leash_locks_set_permits: set semaphore p_name's permit count to p_n,
-- creating it if need be, or switching a free lock's name to a semaphore.
-- Returns one row: refusal (2 when the name is a lock that is held, queued
-- for or waited for; 0 done), kind (the name's).
DROP PROCEDURE IF EXISTS `leash_locks_set_permits`//
CREATE PROCEDURE `leash_locks_set_permits`(IN p_name VARBINARY(512), IN p_n INT)
  MODIFIES SQL DATA
  COMMENT 'leash: resize a semaphore (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence BIGINT;
  DECLARE v_refusal INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  CALL `leash_locks_open`(p_name, v_now, 1, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
  IF v_kind NOT IN (0, 4) OR v_kind = 0 AND (v_owner IS NOT NULL OR EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = p_name FOR UPDATE)) THEN
    SET v_refusal = 2;
  ELSE
    UPDATE `leash_locks` SET `kind` = 4, `permits` = p_n WHERE `name` = p_name;
  END IF;
  COMMIT;
  SELECT v_refusal AS refusal, v_kind AS kind;
END//

-- leash_locks_force_release: delete every lock, lease, permit and place on
-- p_name, whoever holds them, keeping the name's row and its fencing
-- counter. Returns one row: freed (1 when anything was held or queued), kind
-- (the name's; a row of a kind it does not know is left as it is).
DROP PROCEDURE IF EXISTS `leash_locks_force_release`//
CREATE PROCEDURE `leash_locks_force_release`(IN p_name VARBINARY(512))
  MODIFIES SQL DATA
  COMMENT 'leash: force a lock free (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence BIGINT;
  DECLARE v_freed INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  CALL `leash_locks_open`(p_name, v_now, 0, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
  IF v_found AND v_kind IN (0, 4) THEN
    DELETE FROM `leash_locks_holders` WHERE `name` = p_name;
    SET v_freed = ROW_COUNT() > 0 OR v_owner IS NOT NULL;
    UPDATE `leash_locks` SET `owner` = NULL, `write` = 0, `expires_us` = 0 WHERE `name` = p_name;
  END IF;
  COMMIT;
  SELECT v_freed AS freed, COALESCE(v_kind, 0) AS kind;
END//

-- leash_locks_acquire_many: take every name of p_reqs for p_owner as
-- mutexes, or none. p_reqs is a JSON array of [name in hex, lease in µs],
-- sorted by name: the rows are locked in that order. Returns one row:
-- granted (0/1), fences (the tokens, comma-separated, in p_reqs order, when
-- granted), remaining_us (the shortest remaining lease of the blocking
-- holders when refused), refusal (the kind of the first name, in name
-- order, that is not a lock: a semaphore's with live permits or a row of a
-- kind this version does not know; 0 when every name is a lock or free) and
-- refused_name (that name, '' when none). A semaphore's name that no permit
-- holds becomes a lock's at the grant, keeping its fencing counter.
DROP PROCEDURE IF EXISTS `leash_locks_acquire_many`//
CREATE PROCEDURE `leash_locks_acquire_many`(IN p_owner VARBINARY(255), IN p_reqs LONGTEXT)
  MODIFIES SQL DATA
  COMMENT 'leash: take several locks at once (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_count INT DEFAULT JSON_LENGTH(p_reqs);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_name VARBINARY(512);
  DECLARE v_lease BIGINT;
  DECLARE v_found, v_kind, v_write, v_permits INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp, v_owner_fence, v_fence, v_until BIGINT;
  DECLARE v_blocked INT DEFAULT 0;
  DECLARE v_refusal INT DEFAULT 0;
  DECLARE v_refused VARBINARY(512) DEFAULT NULL;
  DECLARE v_remaining BIGINT DEFAULT NULL;
  DECLARE v_fences LONGTEXT DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- Every name's row first, in order; then each name's holders, in order.
  WHILE v_i < v_count DO
    SET v_name = UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][0]'))));
    INSERT INTO `leash_locks` (`name`) VALUES (v_name) ON DUPLICATE KEY UPDATE `name` = `name`;
    SELECT `fence` INTO v_fence FROM `leash_locks` WHERE `name` = v_name FOR UPDATE;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_i = 0;
  WHILE v_i < v_count DO
    SET v_name = UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][0]'))));
    CALL `leash_locks_open`(v_name, v_now, 0, v_found, v_kind, v_owner, v_write, v_exp, v_owner_fence, v_fence, v_permits);
    SELECT COALESCE(MAX(`expires_us`), 0) INTO v_until FROM `leash_locks_holders` WHERE `name` = v_name AND `role` = 2 FOR UPDATE;
    IF v_owner IS NOT NULL AND v_owner <> p_owner THEN
      SET v_until = GREATEST(v_until, v_exp);
    END IF;
    IF v_kind = 4 AND NOT EXISTS (SELECT 1 FROM `leash_locks_holders` WHERE `name` = v_name FOR UPDATE) THEN
      -- A semaphore's name that no permit holds: free, it becomes a lock's
      -- at the grant.
      SET v_kind = 0;
    END IF;
    IF v_kind <> 0 THEN
      IF v_refusal = 0 THEN
        SET v_refusal = v_kind, v_refused = v_name;
      END IF;
      SET v_blocked = v_blocked + 1;
    ELSEIF v_until > 0 THEN
      SET v_blocked = v_blocked + 1, v_remaining = LEAST(COALESCE(v_remaining, v_until - v_now), v_until - v_now);
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_blocked = 0 THEN
    SET v_i = 0;
    WHILE v_i < v_count DO
      SET v_name = UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][0]'))));
      SET v_lease = JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][1]'));
      SELECT `owner`, `owner_fence`, `fence` INTO v_owner, v_owner_fence, v_fence FROM `leash_locks` WHERE `name` = v_name FOR UPDATE;
      IF v_owner = p_owner THEN
        SET v_fence = v_owner_fence;
        UPDATE `leash_locks` SET `expires_us` = v_now + v_lease WHERE `name` = v_name;
      ELSE
        SET v_fence = GREATEST(v_fence + 1, v_now);
        UPDATE `leash_locks` SET `kind` = 0, `permits` = 0, `owner` = p_owner, `write` = 0, `expires_us` = v_now + v_lease,
            `owner_fence` = v_fence, `fence` = v_fence
          WHERE `name` = v_name;
      END IF;
      SET v_fences = CONCAT(v_fences, IF(v_i = 0, '', ','), v_fence);
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  COMMIT;
  SELECT v_blocked = 0 AS granted, v_fences AS fences, COALESCE(v_remaining, -1) AS remaining_us, v_refusal AS refusal,
    COALESCE(v_refused, '') AS refused_name;
END//

-- leash_locks_renew: set the lease of each lock of p_reqs still held by its
-- owner to its lease from now. p_reqs is a JSON array of [name in hex, owner
-- in hex, lease in µs, kind], sorted by name (the store's locking order).
-- One UPDATE renews the exclusive locks, one the readers and permits, in one
-- transaction; a read after its commit reports, per request in order: i (1-based), status (1 renewed,
-- 2 gone: no such lock or lease ended, 3 taken: another owner holds the
-- name, 4 the name holds a lock of another family: left as it is).
DROP PROCEDURE IF EXISTS `leash_locks_renew`//
CREATE PROCEDURE `leash_locks_renew`(IN p_reqs LONGTEXT)
  MODIFIES SQL DATA
  COMMENT 'leash: renew many locks (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- STRAIGHT_JOIN and FORCE INDEX fix the plan: each request looks its row
  -- up by primary key, in the order of p_reqs. Left to itself, the
  -- optimizer scans a small table whole, locking rows of other names.
  UPDATE JSON_TABLE(p_reqs, '$[*]' COLUMNS (
      `n` VARCHAR(1024) PATH '$[0]', `o` VARCHAR(510) PATH '$[1]', `lease` BIGINT PATH '$[2]', `k` INT PATH '$[3]')) r
    STRAIGHT_JOIN `leash_locks` l FORCE INDEX (PRIMARY)
      ON l.`name` = UNHEX(r.`n`)
    SET l.`expires_us` = v_now + r.`lease`
    WHERE r.`k` IN (0, 1, 3) AND l.`kind` = 0 AND l.`owner` = UNHEX(r.`o`) AND l.`expires_us` > v_now;
  UPDATE JSON_TABLE(p_reqs, '$[*]' COLUMNS (
      `n` VARCHAR(1024) PATH '$[0]', `o` VARCHAR(510) PATH '$[1]', `lease` BIGINT PATH '$[2]', `k` INT PATH '$[3]')) r
    STRAIGHT_JOIN `leash_locks_holders` h FORCE INDEX (PRIMARY)
      ON h.`name` = UNHEX(r.`n`) AND h.`owner` = UNHEX(r.`o`) AND h.`role` = r.`k`
    SET h.`expires_us` = v_now + r.`lease`
    WHERE r.`k` IN (2, 4) AND h.`expires_us` > v_now;
  COMMIT;
  SELECT r.`i`,
      CASE
        WHEN r.`k` IN (2, 4) THEN
          IF(EXISTS (SELECT 1 FROM `leash_locks_holders` h WHERE h.`name` = UNHEX(r.`n`) AND h.`owner` = UNHEX(r.`o`)
              AND h.`role` = r.`k` AND h.`expires_us` > v_now), 1, 2)
        WHEN l.`name` IS NULL THEN 2
        WHEN l.`kind` <> 0 THEN 4
        WHEN l.`owner` = UNHEX(r.`o`) AND l.`expires_us` > v_now THEN 1
        WHEN l.`owner` IS NOT NULL AND l.`expires_us` > v_now THEN 3
        WHEN EXISTS (SELECT 1 FROM `leash_locks_holders` h WHERE h.`name` = l.`name` AND h.`role` = 2 AND h.`expires_us` > v_now) THEN 3
        ELSE 2
      END AS status
    FROM JSON_TABLE(p_reqs, '$[*]' COLUMNS (
      `i` FOR ORDINALITY, `n` VARCHAR(1024) PATH '$[0]', `o` VARCHAR(510) PATH '$[1]', `k` INT PATH '$[3]')) r
    LEFT JOIN `leash_locks` l FORCE INDEX (PRIMARY) ON l.`name` = UNHEX(r.`n`)
    ORDER BY r.`i`;
END//

-- leash_locks_waiting: register Store p_store as waiting for p_name until
-- p_ttl_us from now, or, when p_ttl_us is 0, unregister it; registrations of
-- the name that ended (a Store that stopped without unregistering) are
-- deleted first. Two statements, each its own transaction, at READ
-- COMMITTED.
DROP PROCEDURE IF EXISTS `leash_locks_waiting`//
CREATE PROCEDURE `leash_locks_waiting`(IN p_name VARBINARY(512), IN p_store VARBINARY(32), IN p_ttl_us BIGINT)
  MODIFIES SQL DATA
  COMMENT 'leash: count a waiting client (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  DELETE FROM `leash_locks_waiters` WHERE `name` = p_name AND (`expires_us` <= v_now OR `store` = p_store AND p_ttl_us = 0);
  IF p_ttl_us > 0 THEN
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    INSERT INTO `leash_locks_waiters` (`name`, `store`, `expires_us`) VALUES (p_name, p_store, v_now + p_ttl_us)
      ON DUPLICATE KEY UPDATE `expires_us` = v_now + p_ttl_us;
  END IF;
END//

-- leash_locks_put_client: replace the record of client p_id, to expire
-- p_ttl_us from now, after deleting a few records that expired (those of
-- clients that ended without deleting theirs). Two statements, each its own
-- transaction, the first at READ COMMITTED.
DROP PROCEDURE IF EXISTS `leash_locks_put_client`//
CREATE PROCEDURE `leash_locks_put_client`(IN p_id VARBINARY(64), IN p_record BLOB, IN p_ttl_us BIGINT)
  MODIFIES SQL DATA
  COMMENT 'leash: write a holder record (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  DELETE FROM `leash_locks_clients` WHERE `expires_us` < v_now ORDER BY `expires_us` LIMIT 16;
  INSERT INTO `leash_locks_clients` (`id`, `record`, `expires_us`) VALUES (p_id, p_record, v_now + p_ttl_us)
    ON DUPLICATE KEY UPDATE `record` = p_record, `expires_us` = v_now + p_ttl_us;
END//

DELIMITER ;

INSERT INTO `leash_locks_schema` (`app`, `version`) VALUES ('leash', 1) ON DUPLICATE KEY UPDATE `version` = 1;
