-- leash mysqlstore schema, version 2, for MySQL 8.0.4+ and MariaDB 10.6+ (InnoDB).
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

-- Scheduled jobs (driver.JobStore), since schema version 2: a job's latest
-- claim, one row per job with a claim or a record. Times here are Unix
-- milliseconds by the server's clock (its µs, divided).
CREATE TABLE IF NOT EXISTS `leash_locks_jobs` (
  `name`    VARBINARY(512)  NOT NULL           COMMENT 'job name, which is also its run lock''s name',
  `tick`    BIGINT          NOT NULL DEFAULT 0 COMMENT 'the latest claim''s tick, Unix ms; 0 when none',
  `attempt` INT             NOT NULL DEFAULT 0 COMMENT 'the latest claim''s attempt; 0 when none',
  `outcome` VARBINARY(16)   NOT NULL DEFAULT '' COMMENT 'how the latest claim''s run ended (running until told)',
  `client`  VARBINARY(255)  NOT NULL DEFAULT '' COMMENT 'the latest claim''s claimer, a leash Client id',
  `spec`    VARBINARY(256)  NOT NULL DEFAULT '' COMMENT 'the job''s schedule, as the latest claim giving one said',
  `seq`     BIGINT          NOT NULL DEFAULT 0 COMMENT 'the seq of the job''s newest record',
  PRIMARY KEY (`name`)
) ENGINE=InnoDB COMMENT='leash scheduled jobs (github.com/leash-go/leash/mysqlstore)';

-- A job's last run records, numbered by seq, newest highest.
CREATE TABLE IF NOT EXISTS `leash_locks_runs` (
  `name`       VARBINARY(512)  NOT NULL           COMMENT 'job name',
  `seq`        BIGINT          NOT NULL           COMMENT 'the record''s number in its job',
  `tick`       BIGINT          NOT NULL           COMMENT 'the tick run, Unix ms',
  `attempt`    INT             NOT NULL,
  `host`       VARBINARY(255)  NOT NULL DEFAULT '' COMMENT 'the claimer''s host',
  `pid`        INT             NOT NULL DEFAULT 0  COMMENT 'the claimer''s process id',
  `client`     VARBINARY(255)  NOT NULL DEFAULT '' COMMENT 'the claimer''s leash Client id',
  `claim`      VARBINARY(255)  NOT NULL DEFAULT '' COMMENT 'the id the claimer gave its claim; empty for none',
  `started_ms` BIGINT          NOT NULL           COMMENT 'claimed, Unix ms by the server''s clock',
  `ended_ms`   BIGINT          NOT NULL DEFAULT 0  COMMENT 'its end recorded, Unix ms; 0 while running',
  `outcome`    VARBINARY(16)   NOT NULL           COMMENT 'running, ok, failed, skipped, missed, cancelled or lost',
  `fence`      BIGINT          NOT NULL DEFAULT 0  COMMENT 'the run lock''s fencing token; 0 when none',
  `error`      VARBINARY(1024) NOT NULL DEFAULT '' COMMENT 'the run''s error text',
  PRIMARY KEY (`name`, `seq`)
) ENGINE=InnoDB COMMENT='leash scheduled jobs'' runs (github.com/leash-go/leash/mysqlstore)';

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

-- The job procedures lock the job's row of leash_locks_jobs (inserting it
-- first, ON DUPLICATE KEY, so that two first claims of a job queue on one
-- row) before they read or write the job's records, and only read the lock
-- tables, with consistent (non-locking) reads, to tell whether a run's
-- claimer holds the job's lock. A claim that grants nothing rolls back, so
-- that it leaves no row. Each reads the server's clock once, at its start.

-- leash_locks_job_held: o_held is 2 when the client p_client holds a lock
-- or a read lease or permit on p_name at p_now (µs), 1 when someone else
-- does, 0 when no one does. A consistent read: it locks nothing.
DROP PROCEDURE IF EXISTS `leash_locks_job_held`//
CREATE PROCEDURE `leash_locks_job_held`(IN p_name VARBINARY(512), IN p_client VARBINARY(255), IN p_now BIGINT, OUT o_held INT)
  READS SQL DATA
  COMMENT 'leash: whether a job''s lock is held (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_any, v_mine INT DEFAULT 0;
  SELECT COUNT(*), COALESCE(SUM(SUBSTRING_INDEX(h.`o`, ':', 1) = p_client), 0) INTO v_any, v_mine FROM (
    SELECT `owner` AS `o` FROM `leash_locks` WHERE `name` = p_name AND `owner` IS NOT NULL AND `expires_us` > p_now
    UNION ALL
    SELECT `owner` FROM `leash_locks_holders` WHERE `name` = p_name AND `role` IN (2, 4) AND `expires_us` > p_now) AS h;
  SET o_held = IF(v_mine > 0, 2, IF(v_any > 0, 1, 0));
END//

-- leash_locks_claim_tick: judge a claim of tick p_tick (Unix ms), attempt
-- p_attempt, of job p_name (driver.JobStore.ClaimTick), in this order:
-- taken (n: the latest claim's tick; r_*: its record, r_held as
-- leash_locks_job_held says of its claimer), early (n: the tick minus now,
-- ms), late (p_until > 0 and now after it), else granted (n: the tick
-- claimed before, 0 for none; prev_spec: the schedule kept before, '' for
-- none): the claim becomes the job's latest and a record of its run (with
-- the claim's id p_claim) is added, keeping the last p_keep. Returns one
-- row: status, now_ms, n, prev_spec, and the r_* columns (NULL but for
-- taken).
DROP PROCEDURE IF EXISTS `leash_locks_claim_tick`//
CREATE PROCEDURE `leash_locks_claim_tick`(IN p_name VARBINARY(512), IN p_tick BIGINT, IN p_attempt INT,
    IN p_tolerance BIGINT, IN p_until BIGINT, IN p_host VARBINARY(255), IN p_pid INT, IN p_client VARBINARY(255),
    IN p_claim VARBINARY(255), IN p_keep INT, IN p_spec VARBINARY(256))
  MODIFIES SQL DATA
  COMMENT 'leash: claim a job''s tick (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now_us BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_now, v_tick, v_seq, v_n BIGINT DEFAULT 0;
  DECLARE v_attempt INT DEFAULT 0;
  DECLARE v_outcome VARBINARY(16) DEFAULT '';
  DECLARE v_spec VARBINARY(256) DEFAULT '';
  DECLARE v_status VARCHAR(8) DEFAULT 'granted';
  DECLARE v_nf INT DEFAULT 0;
  DECLARE r_tick, r_started, r_ended, r_fence BIGINT DEFAULT NULL;
  DECLARE r_attempt, r_pid, r_held INT DEFAULT NULL;
  DECLARE r_host, r_client, r_claim VARBINARY(255) DEFAULT NULL;
  DECLARE r_outcome VARBINARY(16) DEFAULT NULL;
  DECLARE r_error VARBINARY(1024) DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_nf = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET v_now = v_now_us DIV 1000;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO `leash_locks_jobs` (`name`) VALUES (p_name) ON DUPLICATE KEY UPDATE `name` = `name`;
  SELECT `tick`, `attempt`, `outcome`, `spec`, `seq` INTO v_tick, v_attempt, v_outcome, v_spec, v_seq
    FROM `leash_locks_jobs` WHERE `name` = p_name FOR UPDATE;
  IF v_attempt > 0 AND (v_tick > p_tick
      OR (v_tick = p_tick AND (p_attempt <> v_attempt + 1 OR v_outcome NOT IN ('failed', 'cancelled')))
      OR (p_tick > v_tick AND p_attempt <> 1)) THEN
    SET v_status = 'taken', v_n = v_tick;
    SELECT `tick`, `attempt`, `host`, `pid`, `client`, `claim`, `started_ms`, `ended_ms`, `outcome`, `fence`, `error`
      INTO r_tick, r_attempt, r_host, r_pid, r_client, r_claim, r_started, r_ended, r_outcome, r_fence, r_error
      FROM `leash_locks_runs` WHERE `name` = p_name AND `tick` = v_tick AND `attempt` = v_attempt ORDER BY `seq` DESC LIMIT 1;
    IF v_nf = 0 THEN
      CALL `leash_locks_job_held`(p_name, r_client, v_now_us, r_held);
    END IF;
  ELSEIF v_attempt = 0 AND p_attempt <> 1 THEN
    SET v_status = 'taken';
  ELSEIF p_tick - v_now > p_tolerance THEN
    SET v_status = 'early', v_n = p_tick - v_now;
  ELSEIF p_until > 0 AND v_now > p_until THEN
    SET v_status = 'late';
  END IF;
  IF v_status = 'granted' THEN
    SET v_n = IF(v_attempt > 0, v_tick, 0), v_seq = v_seq + 1;
    UPDATE `leash_locks_jobs` SET `tick` = p_tick, `attempt` = p_attempt, `outcome` = 'running', `client` = p_client,
        `spec` = IF(p_spec <> '', p_spec, `spec`), `seq` = v_seq
      WHERE `name` = p_name;
    INSERT INTO `leash_locks_runs` (`name`, `seq`, `tick`, `attempt`, `host`, `pid`, `client`, `claim`, `started_ms`, `outcome`)
      VALUES (p_name, v_seq, p_tick, p_attempt, p_host, p_pid, p_client, p_claim, v_now, 'running');
    DELETE FROM `leash_locks_runs` WHERE `name` = p_name AND `seq` <= v_seq - p_keep;
    COMMIT;
  ELSE
    ROLLBACK; -- nothing changed but, for a job's first claim, its new row
  END IF;
  SELECT v_status AS status, v_now AS now_ms, v_n AS n, IF(v_status = 'granted', v_spec, '') AS prev_spec,
    r_tick, r_attempt, r_host, r_pid, r_client, r_claim, r_started,
    r_ended, r_outcome, r_fence, r_error, r_held;
END//

-- leash_locks_end_run: record how the run of tick p_tick, attempt
-- p_attempt, of job p_name ended, when p_client claimed it and its record
-- is kept (the newest of that tick and attempt): outcome, fence, error, and
-- ended now; the job's latest claim learns the outcome when it is that run.
-- Returns one row: updated (0/1).
DROP PROCEDURE IF EXISTS `leash_locks_end_run`//
CREATE PROCEDURE `leash_locks_end_run`(IN p_name VARBINARY(512), IN p_tick BIGINT, IN p_attempt INT,
    IN p_client VARBINARY(255), IN p_outcome VARBINARY(16), IN p_fence BIGINT, IN p_error VARBINARY(1024))
  MODIFIES SQL DATA
  COMMENT 'leash: record a job run''s end (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
  DECLARE v_tick, v_seq BIGINT DEFAULT 0;
  DECLARE v_attempt, v_nf, v_updated INT DEFAULT 0;
  DECLARE v_client VARBINARY(255);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_nf = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT `tick`, `attempt` INTO v_tick, v_attempt FROM `leash_locks_jobs` WHERE `name` = p_name FOR UPDATE;
  IF v_nf = 0 THEN
    SELECT `seq`, `client` INTO v_seq, v_client FROM `leash_locks_runs`
      WHERE `name` = p_name AND `tick` = p_tick AND `attempt` = p_attempt ORDER BY `seq` DESC LIMIT 1;
    IF v_nf = 0 AND v_client = p_client THEN
      UPDATE `leash_locks_runs` SET `outcome` = p_outcome, `fence` = p_fence, `error` = p_error, `ended_ms` = v_now
        WHERE `name` = p_name AND `seq` = v_seq;
      IF v_tick = p_tick AND v_attempt = p_attempt THEN
        UPDATE `leash_locks_jobs` SET `outcome` = p_outcome WHERE `name` = p_name;
      END IF;
      SET v_updated = 1;
    END IF;
  END IF;
  COMMIT;
  SELECT v_updated AS updated;
END//

-- leash_locks_add_runs: add records of runs never claimed to job p_name's
-- history, keeping its last p_keep. p_runs is a JSON array of records,
-- oldest first, each an array: tick, attempt, host (hex), pid, client
-- (hex), started, ended (Unix ms; 0 is now), outcome, fence, error (hex),
-- claim (hex). Each record goes below the records of later ticks (the
-- claim that found the ticks missed, recorded before): above the newest
-- record whose tick is not later, the records over it moving up one seq.
-- So the history stays newest tick first, and trimming drops the oldest
-- ticks, never that claim. The job's latest claim is left as it is.
-- Returns nothing.
DROP PROCEDURE IF EXISTS `leash_locks_add_runs`//
CREATE PROCEDURE `leash_locks_add_runs`(IN p_name VARBINARY(512), IN p_keep INT, IN p_runs LONGTEXT)
  MODIFIES SQL DATA
  COMMENT 'leash: add records to a job''s history (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
  DECLARE v_count INT DEFAULT JSON_LENGTH(p_runs);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_seq, v_at, v_tick, v_started, v_ended BIGINT DEFAULT 0;
  DECLARE v_run LONGTEXT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO `leash_locks_jobs` (`name`) VALUES (p_name) ON DUPLICATE KEY UPDATE `name` = `name`;
  SELECT `seq` INTO v_seq FROM `leash_locks_jobs` WHERE `name` = p_name FOR UPDATE;
  WHILE v_i < v_count DO
    SET v_run = JSON_EXTRACT(p_runs, CONCAT('$[', v_i, ']'));
    SET v_tick = JSON_EXTRACT(v_run, '$[0]'), v_started = JSON_EXTRACT(v_run, '$[5]'), v_ended = JSON_EXTRACT(v_run, '$[6]');
    -- Its seq: above the newest record of a tick not later than its own;
    -- the lowest when every record's tick is later; the next when there is
    -- none. The records from there up move up one, highest first, so that
    -- no two ever share a seq.
    SET v_at = (SELECT MAX(`seq`) + 1 FROM `leash_locks_runs` WHERE `name` = p_name AND `tick` <= v_tick);
    IF v_at IS NULL THEN
      SET v_at = (SELECT COALESCE(MIN(`seq`), v_seq + 1) FROM `leash_locks_runs` WHERE `name` = p_name);
    END IF;
    UPDATE `leash_locks_runs` SET `seq` = `seq` + 1 WHERE `name` = p_name AND `seq` >= v_at ORDER BY `seq` DESC;
    SET v_seq = v_seq + 1;
    INSERT INTO `leash_locks_runs` (`name`, `seq`, `tick`, `attempt`, `host`, `pid`, `client`, `claim`, `started_ms`,
        `ended_ms`, `outcome`, `fence`, `error`)
      VALUES (p_name, v_at, v_tick, JSON_EXTRACT(v_run, '$[1]'),
        UNHEX(JSON_UNQUOTE(JSON_EXTRACT(v_run, '$[2]'))), JSON_EXTRACT(v_run, '$[3]'),
        UNHEX(JSON_UNQUOTE(JSON_EXTRACT(v_run, '$[4]'))), UNHEX(JSON_UNQUOTE(JSON_EXTRACT(v_run, '$[10]'))),
        IF(v_started = 0, v_now, v_started), IF(v_ended = 0, v_now, v_ended),
        JSON_UNQUOTE(JSON_EXTRACT(v_run, '$[7]')), JSON_EXTRACT(v_run, '$[8]'),
        UNHEX(JSON_UNQUOTE(JSON_EXTRACT(v_run, '$[9]'))));
    SET v_i = v_i + 1;
  END WHILE;
  UPDATE `leash_locks_jobs` SET `seq` = v_seq WHERE `name` = p_name;
  DELETE FROM `leash_locks_runs` WHERE `name` = p_name AND `seq` <= v_seq - p_keep;
  COMMIT;
END//

-- leash_locks_job_history: job p_name's latest claim and its last p_n
-- records (p_n <= 0: all), newest first, read in one consistent
-- (non-locking) statement: a row per record (one row with NULL record
-- columns when there is none), each with now_ms, the latest claim's tick,
-- attempt and spec, and, for a record still running, mine (1 when its
-- claimer holds a lock, read lease or permit on p_name) and any (1 when
-- anyone does).
DROP PROCEDURE IF EXISTS `leash_locks_job_history`//
CREATE PROCEDURE `leash_locks_job_history`(IN p_name VARBINARY(512), IN p_n INT)
  READS SQL DATA
  COMMENT 'leash: read a job''s history (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_limit INT DEFAULT IF(p_n > 0, p_n, 2147483647);
  SELECT v_now DIV 1000 AS now_ms, COALESCE(j.`tick`, 0), COALESCE(j.`attempt`, 0), COALESCE(j.`spec`, ''),
      r.`tick`, r.`attempt`, r.`host`, r.`pid`, r.`client`, r.`claim`, r.`started_ms`, r.`ended_ms`, r.`outcome`, r.`fence`, r.`error`,
      IF(r.`outcome` = 'running' AND (
          EXISTS (SELECT 1 FROM `leash_locks` l WHERE l.`name` = p_name AND l.`expires_us` > v_now
                  AND SUBSTRING_INDEX(l.`owner`, ':', 1) = r.`client`)
          OR EXISTS (SELECT 1 FROM `leash_locks_holders` h WHERE h.`name` = p_name AND h.`role` IN (2, 4)
                     AND h.`expires_us` > v_now AND SUBSTRING_INDEX(h.`owner`, ':', 1) = r.`client`)), 2,
        IF(r.`outcome` = 'running' AND (
          EXISTS (SELECT 1 FROM `leash_locks` l WHERE l.`name` = p_name AND l.`owner` IS NOT NULL AND l.`expires_us` > v_now)
          OR EXISTS (SELECT 1 FROM `leash_locks_holders` h WHERE h.`name` = p_name AND h.`role` IN (2, 4)
                     AND h.`expires_us` > v_now)), 1, 0)) AS held
    FROM (SELECT 1 AS `one`) AS o
    LEFT JOIN `leash_locks_jobs` j ON j.`name` = p_name
    LEFT JOIN `leash_locks_runs` r ON r.`name` = p_name
    ORDER BY r.`seq` DESC LIMIT v_limit;
END//

DELIMITER ;

INSERT INTO `leash_locks_schema` (`app`, `version`) VALUES ('leash', 2) ON DUPLICATE KEY UPDATE `version` = 2;
