-- leash PostgreSQL lock store (package pgstore), schema version 2.
--
-- This is the DDL that Store.Migrate runs, in one transaction, for the
-- default names: schema public, table leash_locks. Every object's name starts
-- with the table's. For other names, pgstore.DDL(schema, table) returns this
-- text with every "public.leash_locks…" name replaced (quoted as identifiers);
-- `go doc github.com/leash-go/leash/pgstore` says more.
--
-- Rules every function keeps (see the package doc):
--   * It locks the row of each name it touches in leash_locks first (FOR
--     UPDATE), several names in name order, and only then reads or writes
--     that name's rows in leash_locks_holds. Under READ COMMITTED each
--     statement of a function takes a fresh snapshot, so what it reads
--     after the lock is the latest committed state; the fixed order rules
--     out deadlocks. The client sends one statement per operation, so no row
--     lock outlives a function call: a paused client holds none. A function
--     waits at most lock_timeout (5s) for a row lock, so that a transaction
--     of someone else's that holds a row makes calls fail, not hang.
--   * Lease time is the server's clock_timestamp(), read once per call.
--   * Every function first checks that it runs under READ COMMITTED
--     (leash_locks_isolation), which the rule above needs.
--   * Expired holds of a name are deleted by the calls that lock that name;
--     the name's row, which keeps its fencing counter, is never deleted
--     once committed (acquire_many deletes rows it inserted itself when it
--     grants nothing, before anyone else can see them).
--   * A release notifies (pg_notify) in the same transaction, so waiters hear
--     of it only once it is committed.

-- leash_locks_version marks the tables as leash's and says which schema they
-- have. Store refuses tables without it.
CREATE TABLE public.leash_locks_version (
    version integer NOT NULL
);

-- leash_locks has one row per lock name ever granted: its kind and its
-- fencing counter (the last token granted), kept when nothing holds it.
CREATE TABLE public.leash_locks (
    name    text PRIMARY KEY,
    -- 'l': a lock (mutex, fair, read-write); 's': a semaphore.
    kind    text NOT NULL DEFAULT 'l' CHECK (kind IN ('l', 's')),
    -- The last fencing token granted: max(fence + 1, server time in µs).
    fence   bigint NOT NULL DEFAULT 0,
    -- A semaphore's permit count.
    permits integer NOT NULL DEFAULT 0
) WITH (fillfactor = 80);

-- leash_locks_holds has one row per hold, waiting place and mark on a name.
CREATE TABLE public.leash_locks_holds (
    name    text NOT NULL,
    -- 'x' exclusive (Mutex, FairMutex), 'w' writer, 'r' reader, 'p' permit,
    -- 'q' fair-queue place, 'm' waiting-writer mark.
    role    text NOT NULL CHECK (role IN ('x', 'w', 'r', 'p', 'q', 'm')),
    owner   text NOT NULL,
    -- End of the lease (or of the place or mark), by the server's clock.
    expires timestamptz NOT NULL,
    -- The hold's fencing token ('x', 'w', 'r', 'p').
    fence   bigint NOT NULL DEFAULT 0,
    -- Arrival order of a fair-queue place ('q').
    seq     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (name, role, owner)
) WITH (fillfactor = 80);

-- leash_locks_clients holds the records of the clients that hold locks, for
-- operators (driver.ClientRecorder). The locks never depend on them.
CREATE TABLE public.leash_locks_clients (
    id      text PRIMARY KEY,
    record  jsonb NOT NULL,
    expires timestamptz NOT NULL
);

-- leash_locks_isolation raises, with SQLSTATE LK001, unless the running
-- transaction is READ COMMITTED. Every function calls it first: their row
-- locks order the calls only when each statement reads the latest committed
-- state, which a REPEATABLE READ or SERIALIZABLE snapshot does not (calls
-- would fail with serialization errors, or a fair waiter be passed over). A
-- function cannot change the isolation of the transaction it runs in.
CREATE FUNCTION public.leash_locks_isolation() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'leash: the lock functions run only under READ COMMITTED isolation, not %',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'LK001',
                  HINT = 'Set default_transaction_isolation = ''read committed'' for the store''s connections, and do not call the functions inside a transaction of another isolation.';
    END IF;
END
$$;

-- leash_locks_acquire takes one lock. p_kind is driver.Kind: 0 mutex, 1 fair,
-- 2 read, 3 write, 4 permit. p_lease and p_wait are in microseconds. Returns
-- whether it was granted and its token; otherwise the microseconds until the
-- blocking lease (or the queue head's place) ends, -1 when unknown. refused
-- is set, and nothing changed, when the name holds another kind of lock
-- (what it holds) or a reader asks to write ('upgrade'). A name with no
-- live holds, places or marks is free for either kind: it takes the kind
-- of the lock it grants, keeping its fencing counter.
CREATE FUNCTION public.leash_locks_acquire(
    p_kind smallint, p_name text, p_owner text, p_parent text,
    p_lease bigint, p_wait bigint, p_permits integer,
    OUT acquired boolean, OUT fence bigint, OUT remaining bigint, OUT refused text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now      timestamptz := clock_timestamp();
    l        public.leash_locks%ROWTYPE;
    h        public.leash_locks_holds%ROWTYPE;
    blocked  timestamptz; -- when the blocking lease ends; NULL: nothing blocks
    head     public.leash_locks_holds%ROWTYPE;
    v_role   text;        -- the role to grant
    n        integer;
BEGIN
    PERFORM public.leash_locks_isolation();
    acquired := false; fence := 0; remaining := -1;
    SELECT * INTO l FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO public.leash_locks (name, kind, permits)
        VALUES (p_name, CASE WHEN p_kind = 4 THEN 's' ELSE 'l' END, greatest(p_permits, 0))
        ON CONFLICT (name) DO NOTHING;
        SELECT * INTO l FROM public.leash_locks WHERE name = p_name FOR UPDATE;
        IF NOT FOUND THEN -- deleted between the two statements
            RAISE EXCEPTION 'leash: the row of lock % vanished while it was being locked', p_name
                USING ERRCODE = 'LK002';
        END IF;
    END IF;
    -- On both paths: the row may have been inserted by someone else, whose
    -- holds may have expired since.
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND expires <= t_now;

    IF p_kind = 4 THEN
        IF l.kind <> 's' THEN -- free of locks, places and marks: a semaphore from this grant
            IF EXISTS (SELECT 1 FROM public.leash_locks_holds
                       WHERE name = p_name AND role IN ('x', 'w', 'r', 'q', 'm')) THEN
                refused := 'a mutex or readers-writer lock, not a semaphore';
                RETURN;
            END IF;
            l.kind := 's'; l.permits := greatest(p_permits, 0);
        END IF;
        SELECT * INTO h FROM public.leash_locks_holds WHERE name = p_name AND role = 'p' AND owner = p_owner;
        IF FOUND THEN -- a retry of a granted permit
            UPDATE public.leash_locks_holds SET expires = t_now + p_lease * interval '1 microsecond'
            WHERE name = p_name AND role = 'p' AND owner = p_owner;
            acquired := true; fence := h.fence;
            RETURN;
        END IF;
        SELECT count(*), min(expires) INTO n, blocked FROM public.leash_locks_holds
        WHERE name = p_name AND role = 'p';
        IF n >= l.permits THEN
            remaining := coalesce((extract(epoch FROM blocked - t_now) * 1000000)::bigint, -1);
            RETURN;
        END IF;
        v_role := 'p';
    ELSE
        IF l.kind = 's' THEN -- free of permits: a lock from this grant
            IF EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role = 'p') THEN
                refused := 'a semaphore, not a mutex or readers-writer lock';
                RETURN;
            END IF;
            l.kind := 'l';
        END IF;
        IF p_kind <> 2 THEN -- a retry of a granted exclusive lock
            SELECT * INTO h FROM public.leash_locks_holds
            WHERE name = p_name AND role IN ('x', 'w') AND owner = p_owner;
            IF FOUND THEN
                UPDATE public.leash_locks_holds SET expires = t_now + p_lease * interval '1 microsecond'
                WHERE name = p_name AND role = h.role AND owner = p_owner;
                acquired := true; fence := h.fence;
                RETURN;
            END IF;
        END IF;
        -- What blocks an exclusive lock: the exclusive holder, else the
        -- readers (the longest lease among them).
        SELECT expires INTO blocked FROM public.leash_locks_holds
        WHERE name = p_name AND role IN ('x', 'w');
        IF blocked IS NULL THEN
            SELECT max(expires) INTO blocked FROM public.leash_locks_holds WHERE name = p_name AND role = 'r';
        END IF;

        IF p_kind = 0 THEN
            v_role := 'x';
        ELSIF p_kind = 1 THEN
            SELECT * INTO head FROM public.leash_locks_holds
            WHERE name = p_name AND role = 'q' ORDER BY seq LIMIT 1;
            IF blocked IS NULL AND (head.owner IS NULL OR head.owner = p_owner) THEN
                DELETE FROM public.leash_locks_holds WHERE name = p_name AND role = 'q' AND owner = p_owner;
                v_role := 'x';
            ELSE
                IF p_wait > 0 THEN -- take a place at the back, or keep one's own
                    INSERT INTO public.leash_locks_holds (name, role, owner, expires, seq)
                    SELECT p_name, 'q', p_owner, t_now + p_wait * interval '1 microsecond',
                           coalesce(max(seq), 0) + 1
                    FROM public.leash_locks_holds WHERE name = p_name AND role = 'q'
                    ON CONFLICT (name, role, owner) DO UPDATE SET expires = EXCLUDED.expires;
                END IF;
                blocked := coalesce(blocked, head.expires); -- free, but the head is first
            END IF;
        ELSIF p_kind = 2 THEN
            SELECT * INTO h FROM public.leash_locks_holds WHERE name = p_name AND role = 'r' AND owner = p_owner;
            IF FOUND THEN -- a retry of a granted read
                UPDATE public.leash_locks_holds SET expires = t_now + p_lease * interval '1 microsecond'
                WHERE name = p_name AND role = 'r' AND owner = p_owner;
                acquired := true; fence := h.fence;
                RETURN;
            END IF;
            IF p_parent <> '' AND EXISTS (SELECT 1 FROM public.leash_locks_holds
                                         WHERE name = p_name AND role = 'w' AND owner = p_parent) THEN
                blocked := NULL; -- a downgrade: the writer takes a read lease of its own
            ELSE
                SELECT expires INTO blocked FROM public.leash_locks_holds
                WHERE name = p_name AND role IN ('x', 'w');
                IF blocked IS NULL THEN -- a waiting writer keeps new readers out
                    SELECT min(expires) INTO blocked FROM public.leash_locks_holds
                    WHERE name = p_name AND role = 'm';
                END IF;
            END IF;
            v_role := 'r';
        ELSIF p_kind = 3 THEN
            IF EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role = 'r' AND owner = p_owner) THEN
                refused := 'upgrade';
                RETURN;
            END IF;
            IF blocked IS NOT NULL THEN
                IF p_wait > 0 THEN
                    INSERT INTO public.leash_locks_holds (name, role, owner, expires)
                    VALUES (p_name, 'm', p_owner, t_now + p_wait * interval '1 microsecond')
                    ON CONFLICT (name, role, owner) DO UPDATE SET expires = EXCLUDED.expires;
                END IF;
            ELSE
                DELETE FROM public.leash_locks_holds WHERE name = p_name AND role = 'm' AND owner = p_owner;
            END IF;
            v_role := 'w';
        ELSE
            RAISE EXCEPTION 'leash: unknown lock kind %', p_kind;
        END IF;
        IF blocked IS NOT NULL THEN
            remaining := (extract(epoch FROM blocked - t_now) * 1000000)::bigint;
            RETURN;
        END IF;
    END IF;

    -- Grant: a token above every earlier one of the name, and above the
    -- server's clock in µs, so that tokens keep growing if the counter is
    -- ever lost (a restore, a failover to a replica that had not received
    -- the last grants).
    -- The grant also writes the kind (and a new semaphore's permit count).
    l.fence := greatest(l.fence + 1, (extract(epoch FROM t_now) * 1000000)::bigint);
    UPDATE public.leash_locks SET fence = l.fence, kind = l.kind, permits = l.permits WHERE name = p_name;
    INSERT INTO public.leash_locks_holds (name, role, owner, expires, fence)
    VALUES (p_name, v_role, p_owner, t_now + p_lease * interval '1 microsecond', l.fence);
    acquired := true; fence := l.fence;
END
$$;

-- leash_locks_acquire_many takes the exclusive locks on every name in
-- p_names for p_owner (leases in µs, in the same order), all or none.
-- Returns the tokens in request order; otherwise the µs until the first
-- blocking lease ends. refused is the first name that holds a semaphore
-- (live permits); a name that is free takes the kind of a lock at the
-- grant. When it grants nothing, it leaves no row behind.
CREATE FUNCTION public.leash_locks_acquire_many(
    p_names text[], p_owner text, p_leases bigint[],
    OUT acquired boolean, OUT fences bigint[], OUT remaining bigint, OUT refused text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now     timestamptz := clock_timestamp();
    blocked timestamptz;
    r       record;
    f       bigint;
    created text[]; -- the names whose rows this call inserted
    n       bigint;
BEGIN
    PERFORM public.leash_locks_isolation();
    acquired := false; fences := '{}'; remaining := -1;
    WITH ins AS (
        INSERT INTO public.leash_locks (name)
        SELECT DISTINCT u FROM unnest(p_names) AS u ORDER BY u
        ON CONFLICT (name) DO NOTHING
        RETURNING name)
    SELECT array_agg(name) INTO created FROM ins;
    PERFORM 1 FROM public.leash_locks WHERE name = ANY (p_names) ORDER BY name FOR UPDATE;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> (SELECT count(DISTINCT u) FROM unnest(p_names) AS u) THEN -- a row deleted meanwhile
        RAISE EXCEPTION 'leash: % of the % rows of the locks were locked: a row vanished', n,
            (SELECT count(DISTINCT u) FROM unnest(p_names) AS u) USING ERRCODE = 'LK002';
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = ANY (p_names) AND expires <= t_now;
    SELECT name INTO refused FROM public.leash_locks_holds
    WHERE name = ANY (p_names) AND role = 'p' ORDER BY name LIMIT 1;
    IF FOUND THEN -- the name of a semaphore
        DELETE FROM public.leash_locks WHERE name = ANY (created);
        RETURN;
    END IF;
    -- The earliest end among the leases that block: other owners' exclusive
    -- holds, and readers of names no exclusive hold of p_owner's covers.
    SELECT min(e) INTO blocked FROM (
        SELECT CASE WHEN bool_or(role IN ('x', 'w') AND owner = p_owner) THEN NULL
                    ELSE max(expires) END AS e
        FROM public.leash_locks_holds
        WHERE name = ANY (p_names) AND role IN ('x', 'w', 'r')
        GROUP BY name) AS b;
    IF blocked IS NOT NULL THEN
        remaining := (extract(epoch FROM blocked - t_now) * 1000000)::bigint;
        DELETE FROM public.leash_locks WHERE name = ANY (created);
        RETURN;
    END IF;
    FOR r IN SELECT u.name, u.lease FROM unnest(p_names, p_leases) WITH ORDINALITY AS u(name, lease, i) ORDER BY u.i LOOP
        UPDATE public.leash_locks_holds SET expires = t_now + r.lease * interval '1 microsecond'
        WHERE name = r.name AND role IN ('x', 'w') AND owner = p_owner
        RETURNING fence INTO f;
        IF NOT FOUND THEN -- not a retry: a fresh grant
            UPDATE public.leash_locks SET fence = greatest(fence + 1, (extract(epoch FROM t_now) * 1000000)::bigint),
                kind = 'l'
            WHERE name = r.name RETURNING fence INTO f;
            INSERT INTO public.leash_locks_holds (name, role, owner, expires, fence)
            VALUES (r.name, 'x', p_owner, t_now + r.lease * interval '1 microsecond', f);
        END IF;
        fences := fences || f;
    END LOOP;
    acquired := true;
END
$$;

-- leash_locks_renew sets the lease of each (name, owner, kind) still held to
-- its lease (µs) from now. Returns, for each request by its 1-based index,
-- 1 renewed, 2 gone, 3 taken (an exclusive lock someone else holds).
CREATE FUNCTION public.leash_locks_renew(
    p_names text[], p_owners text[], p_kinds smallint[], p_leases bigint[])
RETURNS TABLE (i integer, status smallint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := clock_timestamp();
BEGIN
    PERFORM public.leash_locks_isolation();
    PERFORM 1 FROM public.leash_locks WHERE name = ANY (p_names) ORDER BY name FOR UPDATE;
    RETURN QUERY
    WITH req AS (
        SELECT u.name, u.owner, u.kind, u.lease, u.i::integer AS i,
               CASE u.kind WHEN 2 THEN '{r}' WHEN 4 THEN '{p}' ELSE '{x,w}' END::text[] AS roles
        FROM unnest(p_names, p_owners, p_kinds, p_leases) WITH ORDINALITY AS u(name, owner, kind, lease, i)
    ), renewed AS (
        UPDATE public.leash_locks_holds h SET expires = t_now + req.lease * interval '1 microsecond'
        FROM req
        WHERE h.name = req.name AND h.owner = req.owner AND h.role = ANY (req.roles) AND h.expires > t_now
        RETURNING h.name, h.owner, h.role
    )
    SELECT req.i, (CASE
        WHEN EXISTS (SELECT 1 FROM renewed r WHERE r.name = req.name AND r.owner = req.owner AND r.role = ANY (req.roles)) THEN 1
        WHEN req.kind NOT IN (2, 4) AND EXISTS (
            SELECT 1 FROM public.leash_locks_holds h
            WHERE h.name = req.name AND h.role IN ('x', 'w', 'r') AND h.expires > t_now) THEN 3
        ELSE 2 END)::smallint
    FROM req ORDER BY req.i;
END
$$;

-- leash_locks_notify sends a wake-up about p_name on p_channel. Payload:
-- the watch group (m mutex, f fair, w read-write, p permit, * every group),
-- whom to wake (1 one, a all, r readers, w writer, h head), the byte length
-- of the head owner, ':', the head owner, and the name.
CREATE FUNCTION public.leash_locks_notify(p_channel text, p_group text, p_wake text, p_name text, p_head text)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_notify(p_channel, p_group || p_wake || octet_length(p_head)::text || ':' || p_head || p_name);
$$;

-- leash_locks_release drops p_owner's hold of kind p_kind on p_name and
-- notifies the waiters it frees. released is false when p_owner holds no such
-- lock; refused then says what the name holds if it holds live locks of the
-- other kind (permits where a lock is released, or the reverse).
CREATE FUNCTION public.leash_locks_release(
    p_kind smallint, p_name text, p_owner text, p_channel text,
    OUT released boolean, OUT refused text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now  timestamptz := clock_timestamp();
    l    public.leash_locks%ROWTYPE;
    r    text;
    head text;
BEGIN
    PERFORM public.leash_locks_isolation();
    released := false;
    SELECT * INTO l FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND expires <= t_now;
    DELETE FROM public.leash_locks_holds
    WHERE name = p_name AND owner = p_owner
      AND role = ANY (CASE p_kind WHEN 2 THEN '{r}' WHEN 4 THEN '{p}' ELSE '{x,w}' END::text[])
    RETURNING role INTO r;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name
                   AND role = ANY (CASE WHEN p_kind = 4 THEN '{x,w,r}' ELSE '{p}' END::text[])) THEN
            refused := CASE WHEN p_kind = 4 THEN 'a mutex or readers-writer lock, not a semaphore'
                       ELSE 'a semaphore, not a mutex or readers-writer lock' END;
        END IF;
        RETURN;
    END IF;
    released := true;
    IF r = 'p' THEN
        PERFORM public.leash_locks_notify(p_channel, 'p', '1', p_name, '');
    ELSIF r = 'r' THEN
        IF NOT EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role = 'r')
           AND EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role = 'm') THEN
            PERFORM public.leash_locks_notify(p_channel, 'w', 'w', p_name, '');
        END IF;
    ELSIF r = 'w' THEN
        IF EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role = 'm') THEN
            PERFORM public.leash_locks_notify(p_channel, 'w', 'w', p_name, '');
        ELSE
            PERFORM public.leash_locks_notify(p_channel, 'w', 'r', p_name, '');
        END IF;
    ELSE
        SELECT owner INTO head FROM public.leash_locks_holds
        WHERE name = p_name AND role = 'q' ORDER BY seq LIMIT 1;
        IF head IS NOT NULL THEN
            PERFORM public.leash_locks_notify(p_channel, 'f', 'h', p_name, head);
        ELSE
            PERFORM public.leash_locks_notify(p_channel, 'm', '1', p_name, '');
        END IF;
    END IF;
END
$$;

-- leash_locks_withdraw removes p_owner's fair-queue place and waiting-writer
-- mark on p_name, and wakes whoever that lets in.
CREATE FUNCTION public.leash_locks_withdraw(p_name text, p_owner text, p_channel text)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now   timestamptz := clock_timestamp();
    head  text;
    held  boolean;
BEGIN
    PERFORM public.leash_locks_isolation();
    PERFORM 1 FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND expires <= t_now;
    SELECT owner INTO head FROM public.leash_locks_holds WHERE name = p_name AND role = 'q' ORDER BY seq LIMIT 1;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND role = 'q' AND owner = p_owner;
    IF FOUND AND head = p_owner
       AND NOT EXISTS (SELECT 1 FROM public.leash_locks_holds WHERE name = p_name AND role IN ('x', 'w', 'r')) THEN
        SELECT owner INTO head FROM public.leash_locks_holds WHERE name = p_name AND role = 'q' ORDER BY seq LIMIT 1;
        IF head IS NOT NULL THEN
            PERFORM public.leash_locks_notify(p_channel, 'f', 'h', p_name, head);
        END IF;
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND role = 'm' AND owner = p_owner;
    IF FOUND AND NOT EXISTS (SELECT 1 FROM public.leash_locks_holds
                             WHERE name = p_name AND role IN ('m', 'x', 'w')) THEN
        PERFORM public.leash_locks_notify(p_channel, 'w', 'r', p_name, '');
    END IF;
END
$$;

-- leash_locks_force deletes every hold, place and mark on p_name, keeping
-- its fencing counter, and wakes every waiter. Returns whether there was any.
CREATE FUNCTION public.leash_locks_force(p_name text, p_channel text, OUT deleted boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := clock_timestamp();
BEGIN
    PERFORM public.leash_locks_isolation();
    deleted := false;
    PERFORM 1 FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND expires <= t_now;
    DELETE FROM public.leash_locks_holds WHERE name = p_name;
    IF FOUND THEN
        deleted := true;
        PERFORM public.leash_locks_notify(p_channel, '*', 'a', p_name, '');
    END IF;
END
$$;

-- leash_locks_set_permits sets the permit count of the semaphore p_name,
-- creating it if there is none, and wakes its waiters. refused says what the
-- name holds when it holds a lock, a fair-queue place or a waiting-writer
-- mark; a free lock name becomes a semaphore.
CREATE FUNCTION public.leash_locks_set_permits(p_name text, p_permits integer, p_channel text, OUT refused text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := clock_timestamp();
    l   public.leash_locks%ROWTYPE;
BEGIN
    PERFORM public.leash_locks_isolation();
    SELECT * INTO l FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO public.leash_locks (name, kind, permits) VALUES (p_name, 's', p_permits)
        ON CONFLICT (name) DO NOTHING;
        SELECT * INTO l FROM public.leash_locks WHERE name = p_name FOR UPDATE;
    END IF;
    DELETE FROM public.leash_locks_holds WHERE name = p_name AND expires <= t_now;
    IF l.kind <> 's' AND EXISTS (SELECT 1 FROM public.leash_locks_holds
                                 WHERE name = p_name AND role IN ('x', 'w', 'r', 'q', 'm')) THEN
        refused := 'a mutex or readers-writer lock, not a semaphore';
        RETURN;
    END IF;
    UPDATE public.leash_locks SET kind = 's', permits = p_permits WHERE name = p_name;
    PERFORM public.leash_locks_notify(p_channel, 'p', 'a', p_name, '');
END
$$;

INSERT INTO public.leash_locks_version (version) VALUES (2);

-- ---- Schema version 2: scheduled jobs (driver.JobStore) ----
-- Migrate brings version-1 tables to version 2 by running, in one
-- transaction, what follows this line (and setting the version to 2).
--
-- A job's rows are locked by the job functions only, each call locking its
-- job's row in leash_locks_jobs (FOR UPDATE) before it reads or writes the
-- job's records; they never lock a row of the lock tables, which they only
-- read (whether a run's claimer holds the job's lock). Every decision is
-- judged by clock_timestamp(), read once per call and kept to the
-- millisecond; times are Unix milliseconds where they are numbers.

-- leash_locks_jobs has one row per job with a claim or a record: its latest
-- claim, the outcome of that claim's run, and the number of its last record.
CREATE TABLE public.leash_locks_jobs (
    name    text PRIMARY KEY,
    -- The latest claim's tick (Unix ms) and attempt; 0 and 0: none yet.
    tick    bigint NOT NULL DEFAULT 0,
    attempt integer NOT NULL DEFAULT 0,
    -- How the latest claim's run ended, as EndRun told it ('running' until then).
    outcome text NOT NULL DEFAULT '',
    -- The latest claim's claimer (its leash Client id).
    client  text NOT NULL DEFAULT '',
    -- The job's schedule, as the latest claim that gave one said.
    spec    text NOT NULL DEFAULT '',
    -- The seq of the job's newest record in leash_locks_runs.
    seq     bigint NOT NULL DEFAULT 0
);

-- leash_locks_runs has a job's last records, numbered by seq (newest highest).
CREATE TABLE public.leash_locks_runs (
    name    text NOT NULL,
    seq     bigint NOT NULL,
    tick    bigint NOT NULL,
    attempt integer NOT NULL,
    host    text NOT NULL DEFAULT '',
    pid     integer NOT NULL DEFAULT 0,
    client  text NOT NULL DEFAULT '',
    -- The id the claimer gave its claim (driver.RunRecord.Claim); '' for none.
    claim   text NOT NULL DEFAULT '',
    -- When the run was claimed and when its end was recorded, by the
    -- server's clock; ended is NULL while it runs.
    started timestamptz NOT NULL,
    ended   timestamptz,
    outcome text NOT NULL CHECK (outcome IN ('running', 'ok', 'failed', 'skipped', 'missed', 'cancelled', 'lost')),
    fence   bigint NOT NULL DEFAULT 0,
    error   text NOT NULL DEFAULT '',
    PRIMARY KEY (name, seq)
);

-- leash_locks_ms is t in Unix milliseconds.
CREATE FUNCTION public.leash_locks_ms(t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT floor(extract(epoch FROM t) * 1000)::bigint;
$$;

-- leash_locks_job_held is 2 when the client p_client holds a lock or permit
-- on p_name (an owner "<client>:…" with a live exclusive, writer, reader or
-- permit hold), 1 when someone else does, 0 when no one does.
CREATE FUNCTION public.leash_locks_job_held(p_name text, p_client text, p_now timestamptz) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN bool_or(split_part(owner, ':', 1) = p_client) THEN 2
                WHEN count(*) > 0 THEN 1 ELSE 0 END
    FROM public.leash_locks_holds
    WHERE name = p_name AND role IN ('x', 'w', 'r', 'p') AND expires > p_now;
$$;

-- leash_locks_claim_tick judges a claim of tick p_tick (Unix ms), attempt
-- p_attempt, of job p_name (see driver.JobStore.ClaimTick), in this order:
-- 'taken' (o_n: the latest claim's tick; o_r_*: its record, o_r_held as
-- leash_locks_job_held says of its claimer), 'early' (o_n: the tick minus
-- now, ms), 'late' (p_until > 0 and now after it), else 'granted' (o_n: the
-- tick claimed before, 0 for none; o_prev_spec: the schedule kept before,
-- '' for none): the claim becomes the job's latest and a record of its run
-- (with the claim's id p_claim) is added, keeping the last p_keep. o_now is
-- now (ms).
CREATE FUNCTION public.leash_locks_claim_tick(
    p_name text, p_tick bigint, p_attempt integer, p_tolerance bigint, p_until bigint,
    p_host text, p_pid integer, p_client text, p_claim text, p_keep integer, p_spec text,
    OUT o_status text, OUT o_now bigint, OUT o_n bigint, OUT o_prev_spec text,
    OUT o_r_tick bigint, OUT o_r_attempt integer, OUT o_r_host text, OUT o_r_pid integer,
    OUT o_r_client text, OUT o_r_claim text, OUT o_r_started bigint, OUT o_r_ended bigint, OUT o_r_outcome text,
    OUT o_r_fence bigint, OUT o_r_error text, OUT o_r_held integer)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := date_trunc('milliseconds', clock_timestamp());
    j     public.leash_locks_jobs%ROWTYPE;
    r     public.leash_locks_runs%ROWTYPE;
    have  boolean;
    v_seq bigint;
BEGIN
    PERFORM public.leash_locks_isolation();
    o_now := public.leash_locks_ms(t_now); o_n := 0; o_prev_spec := '';
    LOOP
        SELECT * INTO j FROM public.leash_locks_jobs WHERE name = p_name FOR UPDATE;
        have := FOUND;
        IF have AND j.attempt > 0 THEN
            IF j.tick > p_tick
               OR (j.tick = p_tick AND (p_attempt <> j.attempt + 1 OR j.outcome NOT IN ('failed', 'cancelled')))
               OR (p_tick > j.tick AND p_attempt <> 1) THEN
                o_status := 'taken'; o_n := j.tick;
                o_r_tick := j.tick; o_r_attempt := j.attempt; o_r_outcome := j.outcome; o_r_client := j.client;
                SELECT * INTO r FROM public.leash_locks_runs
                WHERE name = p_name AND tick = j.tick AND attempt = j.attempt ORDER BY seq DESC LIMIT 1;
                IF FOUND THEN
                    o_r_host := r.host; o_r_pid := r.pid; o_r_client := r.client; o_r_claim := r.claim;
                    o_r_started := public.leash_locks_ms(r.started);
                    o_r_ended := coalesce(public.leash_locks_ms(r.ended), 0);
                    o_r_outcome := r.outcome; o_r_fence := r.fence; o_r_error := r.error;
                    o_r_held := public.leash_locks_job_held(p_name, r.client, t_now);
                END IF;
                RETURN;
            END IF;
        ELSIF p_attempt <> 1 THEN
            o_status := 'taken';
            RETURN;
        END IF;
        IF p_tick - o_now > p_tolerance THEN
            o_status := 'early'; o_n := p_tick - o_now;
            RETURN;
        END IF;
        IF p_until > 0 AND o_now > p_until THEN
            o_status := 'late';
            RETURN;
        END IF;
        EXIT WHEN have;
        -- The job's first row: inserted (and so locked) by this call, or,
        -- when a concurrent call inserted it first, read again, locked.
        INSERT INTO public.leash_locks_jobs (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            j.tick := 0; j.attempt := 0; j.spec := '';
            EXIT;
        END IF;
    END LOOP;
    o_status := 'granted';
    o_n := CASE WHEN j.attempt > 0 THEN j.tick ELSE 0 END;
    o_prev_spec := j.spec;
    UPDATE public.leash_locks_jobs
    SET tick = p_tick, attempt = p_attempt, outcome = 'running', client = p_client,
        spec = CASE WHEN p_spec <> '' THEN p_spec ELSE spec END, seq = seq + 1
    WHERE name = p_name RETURNING seq INTO v_seq;
    INSERT INTO public.leash_locks_runs (name, seq, tick, attempt, host, pid, client, claim, started, outcome)
    VALUES (p_name, v_seq, p_tick, p_attempt, p_host, p_pid, p_client, p_claim, t_now, 'running');
    DELETE FROM public.leash_locks_runs WHERE name = p_name AND seq <= v_seq - p_keep;
END
$$;

-- leash_locks_end_run records how the run of tick p_tick, attempt
-- p_attempt, of job p_name ended, when p_client claimed it and its record
-- is kept (the newest record of that tick and attempt): outcome, fence,
-- error, and ended now; the job's latest claim learns the outcome too when
-- it is that run. o_updated says whether a record was.
CREATE FUNCTION public.leash_locks_end_run(
    p_name text, p_tick bigint, p_attempt integer, p_client text, p_outcome text, p_fence bigint,
    p_error text, OUT o_updated boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := date_trunc('milliseconds', clock_timestamp());
    j     public.leash_locks_jobs%ROWTYPE;
    r     public.leash_locks_runs%ROWTYPE;
BEGIN
    PERFORM public.leash_locks_isolation();
    o_updated := false;
    SELECT * INTO j FROM public.leash_locks_jobs WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO r FROM public.leash_locks_runs
    WHERE name = p_name AND tick = p_tick AND attempt = p_attempt ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND OR r.client <> p_client THEN
        RETURN;
    END IF;
    UPDATE public.leash_locks_runs SET outcome = p_outcome, fence = p_fence, error = p_error, ended = t_now
    WHERE name = p_name AND seq = r.seq;
    IF j.tick = p_tick AND j.attempt = p_attempt THEN
        UPDATE public.leash_locks_jobs SET outcome = p_outcome WHERE name = p_name;
    END IF;
    o_updated := true;
END
$$;

-- leash_locks_add_runs adds records of runs never claimed to job p_name's
-- history, oldest first (the arrays are the records' fields, in order; a
-- started or ended of 0 is now), keeping its last p_keep records. Each
-- record goes below the records of later ticks (the claim that found the
-- ticks missed, recorded before): above the newest record whose tick is not
-- later, the records over it moving up one seq. So the history stays newest
-- tick first, and trimming drops the oldest ticks, never that claim. The
-- job's latest claim is left as it is.
CREATE FUNCTION public.leash_locks_add_runs(
    p_name text, p_keep integer, p_ticks bigint[], p_attempts integer[], p_hosts text[],
    p_pids integer[], p_clients text[], p_claims text[], p_starteds bigint[], p_endeds bigint[],
    p_outcomes text[], p_fences bigint[], p_errors text[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
    t_now timestamptz := date_trunc('milliseconds', clock_timestamp());
    v_top bigint;
    v_at  bigint;
    i     integer;
BEGIN
    PERFORM public.leash_locks_isolation();
    INSERT INTO public.leash_locks_jobs (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;
    SELECT seq INTO v_top FROM public.leash_locks_jobs WHERE name = p_name FOR UPDATE;
    FOR i IN 1 .. coalesce(cardinality(p_ticks), 0) LOOP
        -- The new record's seq: above the newest record of a tick not
        -- later than its own; the lowest when every record's tick is later;
        -- the next when there is none.
        SELECT max(seq) + 1 INTO v_at FROM public.leash_locks_runs WHERE name = p_name AND tick <= p_ticks[i];
        IF v_at IS NULL THEN
            SELECT coalesce(min(seq), v_top + 1) INTO v_at FROM public.leash_locks_runs WHERE name = p_name;
        END IF;
        -- Move the records above it up one, in two steps so that no two rows
        -- ever share a seq (the key is checked row by row).
        UPDATE public.leash_locks_runs SET seq = -(seq + 1) WHERE name = p_name AND seq >= v_at;
        UPDATE public.leash_locks_runs SET seq = -seq WHERE name = p_name AND seq < 0;
        INSERT INTO public.leash_locks_runs (name, seq, tick, attempt, host, pid, client, claim, started,
                                             ended, outcome, fence, error)
        VALUES (p_name, v_at, p_ticks[i], p_attempts[i], p_hosts[i], p_pids[i], p_clients[i], p_claims[i],
                CASE WHEN p_starteds[i] = 0 THEN t_now ELSE to_timestamp(p_starteds[i] / 1000.0) END,
                CASE WHEN p_endeds[i] = 0 THEN t_now ELSE to_timestamp(p_endeds[i] / 1000.0) END,
                p_outcomes[i], p_fences[i], p_errors[i]);
        v_top := v_top + 1;
    END LOOP;
    UPDATE public.leash_locks_jobs SET seq = v_top WHERE name = p_name;
    DELETE FROM public.leash_locks_runs WHERE name = p_name AND seq <= v_top - p_keep;
END
$$;

-- leash_locks_job_history reads job p_name's latest claim and its last p_n
-- records (p_n <= 0: all), newest first, in one snapshot: a row per record
-- (one row with NULL record fields when there is none), each with the
-- job's now (ms), latest tick, attempt and spec, and, for a record still
-- running, whether its claimer holds a lock on p_name (see
-- leash_locks_job_held; 0 for other records).
CREATE FUNCTION public.leash_locks_job_history(p_name text, p_n integer)
RETURNS TABLE (o_now bigint, o_tick bigint, o_attempt integer, o_spec text,
               o_r_tick bigint, o_r_attempt integer, o_r_host text, o_r_pid integer, o_r_client text,
               o_r_claim text, o_r_started bigint, o_r_ended bigint, o_r_outcome text, o_r_fence bigint, o_r_error text,
               o_r_held integer)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t_now timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
    PERFORM public.leash_locks_isolation();
    RETURN QUERY
    SELECT public.leash_locks_ms(t_now), coalesce(j.tick, 0), coalesce(j.attempt, 0), coalesce(j.spec, ''),
           r.tick, r.attempt, r.host, r.pid, r.client, r.claim, public.leash_locks_ms(r.started),
           coalesce(public.leash_locks_ms(r.ended), 0), r.outcome, r.fence, r.error,
           CASE WHEN r.outcome = 'running' THEN public.leash_locks_job_held(p_name, r.client, t_now) ELSE 0 END
    FROM (SELECT 1) AS one
    LEFT JOIN public.leash_locks_jobs j ON j.name = p_name
    LEFT JOIN LATERAL (SELECT * FROM public.leash_locks_runs WHERE name = p_name ORDER BY seq DESC
                       LIMIT CASE WHEN p_n > 0 THEN p_n END) AS r ON true
    ORDER BY r.seq DESC;
END
$$;
