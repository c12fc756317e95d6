-- leash mysqlstore schema, version 1, for MySQL 8.0.4+ and MariaDB 10.6+ (InnoDB).
--
-- Store.Migrate applies this very file (it is embedded in the package). A DBA
-- who applies it by hand runs it with the mysql or mariadb client, in the
-- database the store will use:
--
--     mariadb --database=app < schema.sql
--
-- For a table name other than leash_locks (Options.Table), replace every
-- `leash_locks prefix of an identifier below with the chosen name: the
-- companion table and the procedures are named after the table.
--
-- Times are microseconds since 1970-01-01 UTC by the server's clock, computed
-- as TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)): pure
-- arithmetic on the UTC wall time, so neither the session's time_zone nor the
-- client's loc/parseTime settings can change a lease. Inside a procedure the
-- time is read once, at its start, which is after the client sent the call:
-- a lease counted from it ends no earlier than one counted from the send.
--
-- The procedures run every multi-statement transaction server-side: one CALL
-- holds row locks only while the server runs it, never while waiting for the
-- client, so a client paused (SIGSTOP) or cut off mid-call cannot keep a
-- name locked. Each returns its result only after COMMIT.

-- One row per name ever locked. The row stays when the lock is freed (owner
-- NULL): it keeps the name's fencing counter, so tokens never go back.
CREATE TABLE IF NOT EXISTS `leash_locks` (
  `name`        VARBINARY(512)   NOT NULL            COMMENT 'lock name, bytes as the user named it',
  `kind`        TINYINT UNSIGNED NOT NULL DEFAULT 0  COMMENT '0: an exclusive lock (mutex)',
  `owner`       VARBINARY(255)   NULL                COMMENT 'holder "<client-id>:<n>", NULL when free',
  `expires_us`  BIGINT           NOT NULL DEFAULT 0  COMMENT 'lease end, µs since the epoch (UTC, server clock)',
  `fence`       BIGINT           NOT NULL DEFAULT 0  COMMENT 'last fencing token granted; only grows',
  `acquired_us` BIGINT           NOT NULL DEFAULT 0  COMMENT 'when the holder was granted, µs since the epoch',
  PRIMARY KEY (`name`)
) ENGINE=InnoDB COMMENT='leash locks (github.com/leash-go/leash/mysqlstore)';

-- The schema's version, so that a later leash can migrate it, and the mark
-- that tells leash's table from another application's table of that name.
CREATE TABLE IF NOT EXISTS `leash_locks_schema` (
  `app`     VARCHAR(16) NOT NULL,
  `version` INT         NOT NULL,
  PRIMARY KEY (`app`)
) ENGINE=InnoDB COMMENT='leash schema version (github.com/leash-go/leash/mysqlstore)';

DELIMITER //

-- leash_locks_acquire: take p_name for p_owner with a lease of p_lease_us.
-- Granted when no one holds the name (a fresh token: max(counter + 1, now in
-- µs)) or when p_owner holds it (a retry: same token, lease refreshed).
-- Returns one row: granted (0/1), fence (the grant's token, or the holder's
-- when refused), remaining_us (the holder's remaining lease when refused),
-- kind (what the name holds).
DROP PROCEDURE IF EXISTS `leash_locks_acquire`//
CREATE PROCEDURE `leash_locks_acquire`(IN p_name VARBINARY(512), IN p_owner VARBINARY(255), IN p_lease_us BIGINT)
  MODIFIES SQL DATA
  COMMENT 'leash: take a lock (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  DECLARE v_kind INT DEFAULT 0;
  DECLARE v_owner VARBINARY(255) DEFAULT NULL;
  DECLARE v_exp BIGINT DEFAULT 0;
  DECLARE v_fence BIGINT DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  -- Lock the name's row first, creating it if need be: ON DUPLICATE KEY
  -- takes an exclusive lock on an existing row at once, so two callers never
  -- both hold a shared lock they then want to upgrade (InnoDB's classic
  -- insert deadlock).
  INSERT INTO `leash_locks` (`name`) VALUES (p_name) ON DUPLICATE KEY UPDATE `name` = `name`;
  SELECT `kind`, `owner`, `expires_us`, `fence` INTO v_kind, v_owner, v_exp, v_fence
    FROM `leash_locks` WHERE `name` = p_name FOR UPDATE;
  IF v_kind <> 0 THEN
    SET v_granted = 0;
  ELSEIF v_owner IS NULL OR v_exp <= v_now THEN
    SET v_fence = GREATEST(v_fence + 1, v_now), v_granted = 1;
    UPDATE `leash_locks` SET `owner` = p_owner, `expires_us` = v_now + p_lease_us, `fence` = v_fence, `acquired_us` = v_now
      WHERE `name` = p_name;
  ELSEIF v_owner = p_owner THEN
    SET v_granted = 1;
    UPDATE `leash_locks` SET `expires_us` = v_now + p_lease_us WHERE `name` = p_name;
  END IF;
  COMMIT;
  SELECT v_granted AS granted, v_fence AS fence, v_exp - v_now AS remaining_us, v_kind AS kind;
END//

-- leash_locks_acquire_many: take every name of p_reqs for p_owner, or none.
-- p_reqs is a JSON array of [name in hex, lease in µs], sorted by name: rows
-- are locked in that order, the order every statement of the store locks in,
-- so two calls never wait for each other in a cycle. Returns one row:
-- granted (0/1), fences (the tokens, comma-separated, in p_reqs order, when
-- granted), remaining_us (the shortest remaining lease of the blocking
-- holders when refused), kind (0, or the kind of a name that is not a lock).
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
  DECLARE v_kind INT;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_exp BIGINT;
  DECLARE v_fence BIGINT;
  DECLARE v_blocked INT DEFAULT 0;
  DECLARE v_badkind INT DEFAULT 0;
  DECLARE v_remaining BIGINT DEFAULT NULL;
  DECLARE v_fences LONGTEXT DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  WHILE v_i < v_count DO
    SET v_name = UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][0]'))));
    INSERT INTO `leash_locks` (`name`) VALUES (v_name) ON DUPLICATE KEY UPDATE `name` = `name`;
    SELECT `kind`, `owner`, `expires_us` INTO v_kind, v_owner, v_exp
      FROM `leash_locks` WHERE `name` = v_name FOR UPDATE;
    IF v_kind <> 0 THEN
      SET v_blocked = v_blocked + 1, v_badkind = v_kind;
    ELSEIF v_owner IS NOT NULL AND v_exp > v_now AND v_owner <> p_owner THEN
      SET v_blocked = v_blocked + 1, v_remaining = LEAST(COALESCE(v_remaining, v_exp - v_now), v_exp - v_now);
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_blocked = 0 THEN
    SET v_i = 0;
    WHILE v_i < v_count DO
      SET v_name = UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][0]'))));
      SET v_lease = JSON_EXTRACT(p_reqs, CONCAT('$[', v_i, '][1]'));
      SELECT `owner`, `expires_us`, `fence` INTO v_owner, v_exp, v_fence
        FROM `leash_locks` WHERE `name` = v_name FOR UPDATE;
      IF v_owner IS NULL OR v_exp <= v_now OR v_owner <> p_owner THEN
        SET v_fence = GREATEST(v_fence + 1, v_now);
        UPDATE `leash_locks` SET `owner` = p_owner, `expires_us` = v_now + v_lease, `fence` = v_fence, `acquired_us` = v_now
          WHERE `name` = v_name;
      ELSE
        UPDATE `leash_locks` SET `expires_us` = v_now + v_lease WHERE `name` = v_name;
      END IF;
      SET v_fences = CONCAT(v_fences, IF(v_i = 0, '', ','), v_fence);
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  COMMIT;
  SELECT v_blocked = 0 AS granted, v_fences AS fences, COALESCE(v_remaining, -1) AS remaining_us, v_badkind AS kind;
END//

-- leash_locks_renew: set the lease of each lock of p_reqs still held by its
-- owner to its lease from now. p_reqs is a JSON array of [name in hex, owner
-- in hex, lease in µs], sorted by name (the store's locking order). One
-- UPDATE renews them all; a read after it reports, per request in order:
-- i (1-based), status (1 renewed, 2 gone: no lock or lease ended, 3 taken:
-- another owner holds it, 4: the name holds something that is not a lock).
DROP PROCEDURE IF EXISTS `leash_locks_renew`//
CREATE PROCEDURE `leash_locks_renew`(IN p_reqs LONGTEXT)
  MODIFIES SQL DATA
  COMMENT 'leash: renew many locks (github.com/leash-go/leash/mysqlstore)'
BEGIN
  DECLARE v_now BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
  UPDATE `leash_locks` l
    JOIN JSON_TABLE(p_reqs, '$[*]' COLUMNS (
      `n` VARCHAR(1024) PATH '$[0]', `o` VARCHAR(510) PATH '$[1]', `lease` BIGINT PATH '$[2]')) r
      ON l.`name` = UNHEX(r.`n`)
    SET l.`expires_us` = v_now + r.`lease`
    WHERE l.`kind` = 0 AND l.`owner` = UNHEX(r.`o`) AND l.`expires_us` > v_now;
  SELECT r.`i`,
      CASE
        WHEN l.`name` IS NULL THEN 2
        WHEN l.`kind` <> 0 THEN 4
        WHEN l.`owner` IS NULL OR l.`expires_us` <= v_now THEN 2
        WHEN l.`owner` = UNHEX(r.`o`) THEN 1
        ELSE 3
      END AS status
    FROM JSON_TABLE(p_reqs, '$[*]' COLUMNS (
      `i` FOR ORDINALITY, `n` VARCHAR(1024) PATH '$[0]', `o` VARCHAR(510) PATH '$[1]')) r
    LEFT JOIN `leash_locks` l ON l.`name` = UNHEX(r.`n`)
    ORDER BY r.`i`;
END//

DELIMITER ;

INSERT INTO `leash_locks_schema` (`app`, `version`) VALUES ('leash', 1) ON DUPLICATE KEY UPDATE `version` = 1;
