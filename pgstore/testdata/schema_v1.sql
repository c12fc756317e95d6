-- leash PostgreSQL lock store (package pgstore), schema version 1.
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

INSERT INTO public.leash_locks_version (version) VALUES (1);
