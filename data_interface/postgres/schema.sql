-- The sticker site on PostgreSQL: tables, indexes and one function per page
-- operation (but the ranked lists, selects of the view sticker_cards), with
-- the semantics of ../tarantool/app.lua. Each driver runs this file at start
-- whenever its text changed (common.apply_schema), so it must stay idempotent
-- (a change of a view's columns or a function's result type needs a DROP).
--
-- Layout: like the 2017 benchmark's (id serial, data jsonb) tables, a row is
-- ONE jsonb document, here a JSON array with the fields in the order of the
-- Tarantool tuple, so both databases keep the same thing:
--   stickers  [id, pack, image, rating, votes_plus, votes_minus]
--   packs     [name, title]
--   ballots   [token, session, sticker, partner, deadline]
--   sessions  [uuid, last_seen, visits, ip, user_agent]
--   server    [id, users, views, votes]
-- The key already sits in the document, so there is no serial column: a
-- unique expression index on the key is the primary key, and the other
-- indexes are expression indexes too. server (the counters, in 32 rows whose
-- sums are the site's) is the exception: every batch of visits and every vote
-- updates a row, which would leave a trail of dead versions for every
-- statement to scan, so it has a plain key column (id, as in the document)
-- to find a row by; as no update changes the key, the updates stay HOT.
-- Times are Unix seconds.

CREATE TABLE IF NOT EXISTS stickers (data jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS stickers_id ON stickers (((data->>0)::int));
CREATE INDEX IF NOT EXISTS stickers_rating
    ON stickers (((data->>3)::int), ((data->>0)::int));
CREATE INDEX IF NOT EXISTS stickers_pack
    ON stickers ((data->>1), ((data->>0)::int));

CREATE TABLE IF NOT EXISTS packs (data jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS packs_name ON packs ((data->>0));

CREATE TABLE IF NOT EXISTS ballots (data jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS ballots_token ON ballots ((data->>0));
CREATE INDEX IF NOT EXISTS ballots_deadline ON ballots (((data->>4)::float8));

CREATE TABLE IF NOT EXISTS sessions (data jsonb NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_uuid ON sessions ((data->>0));
CREATE INDEX IF NOT EXISTS sessions_last_seen
    ON sessions (((data->>1)::float8));

CREATE TABLE IF NOT EXISTS server (data jsonb NOT NULL);
ALTER TABLE server ADD COLUMN IF NOT EXISTS id int;
UPDATE server SET id = (data->>0)::int WHERE id IS DISTINCT FROM (data->>0)::int;
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint WHERE conname = 'server_pkey') THEN
        ALTER TABLE server ADD PRIMARY KEY (id);
    END IF;
END $$;
-- The counters are spread over 32 rows, and a connection updates the one
-- its backend's process id picks (1 + pid % 32): with one row, every page view
-- would wait for the commit of the one before (a queue of lock waits and
-- wake-ups across the pool's connections). site_stats adds them up.
INSERT INTO server (id, data)
    SELECT i, jsonb_build_array(i, 0, 0, 0) FROM generate_series(1, 32) i
    ON CONFLICT DO NOTHING;

-- The sweep's limits (expire() reads them; only the owner changes them):
-- sessions idle longer than session_ttl seconds go, and the oldest sessions
-- and ballots beyond the caps.
CREATE TABLE IF NOT EXISTS limits (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    session_ttl float8 NOT NULL CHECK (session_ttl > 0),
    max_sessions bigint NOT NULL CHECK (max_sessions >= 0),
    max_ballots bigint NOT NULL CHECK (max_ballots >= 0));
INSERT INTO limits VALUES (true, 900, 1000000, 1000000) ON CONFLICT DO NOTHING;

-- The text of schema.sql last applied (see common.apply_schema).
CREATE TABLE IF NOT EXISTS schema_digest (digest text NOT NULL);

-- A sticker as the pages see it, with its pack's title.
CREATE OR REPLACE VIEW sticker_cards AS
    SELECT (s.data->>0)::int AS id, s.data->>1 AS pack, s.data->>2 AS image,
           (s.data->>3)::int AS rating, (s.data->>4)::int AS votes_plus,
           (s.data->>5)::int AS votes_minus,
           coalesce(p.data->>1, s.data->>1) AS pack_title
    FROM stickers s LEFT JOIN packs p ON p.data->>0 = s.data->>1;

-- Arguments are checked as app.lua checks them, and refused with SQLSTATE
-- 22023 and a message starting "bad argument". Strings are bounded in bytes:
-- ip 64, user agent 256, pack names 64.
CREATE OR REPLACE FUNCTION refuse(p_what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = 'bad argument: ' || p_what;
END $$;

-- Record visits, given as three arrays of the same length (uuid, ip, user
-- agent; at most 1000), in one statement: each upserts its session (last
-- seen now, one visit more, its last ip and user agent) and counts a view,
-- and a user for a session not there before. Sessions are written in uuid
-- order, so concurrent batches wait for each other instead of deadlocking.
DROP FUNCTION IF EXISTS touch(text, text, text);
DROP FUNCTION IF EXISTS check_visit(text, text, text);
CREATE OR REPLACE FUNCTION record_visits(p_uuids text[], p_ips text[],
    p_agents text[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    t float8 := date_part('epoch', now());
    n int := cardinality(p_uuids);
    new int;
BEGIN
    IF (n <= 1000 AND cardinality(p_ips) = n AND cardinality(p_agents) = n)
            IS NOT TRUE THEN
        PERFORM refuse('visits must be three arrays of one length, at most '
                       '1000');
    END IF;
    IF EXISTS (SELECT FROM unnest(p_uuids, p_ips, p_agents) v(u, i, a)
               WHERE (u ~ '^[0-9a-f-]{36}$' AND octet_length(i) <= 64
                      AND octet_length(a) <= 256) IS NOT TRUE) THEN
        PERFORM refuse('each visit needs a session uuid of 36 characters, '
                       'an ip of at most 64 bytes and a user agent of 256');
    END IF;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    WITH v AS (
        SELECT u, i, a, count(*) OVER (PARTITION BY u) AS c,
               row_number() OVER (PARTITION BY u ORDER BY k DESC) AS last
        FROM unnest(p_uuids, p_ips, p_agents) WITH ORDINALITY v(u, i, a, k)),
    written AS (
        INSERT INTO sessions
            SELECT jsonb_build_array(u, t, c, i, a) FROM v
            WHERE last = 1 ORDER BY u
        ON CONFLICT ((data->>0)) DO UPDATE SET data = jsonb_build_array(
            sessions.data->0, t,
            (sessions.data->>2)::bigint + (excluded.data->>2)::bigint,
            excluded.data->3, excluded.data->4)
        RETURNING xmax = 0 AS inserted)
    SELECT count(*) FILTER (WHERE inserted) INTO new FROM written;
    UPDATE server SET data = jsonb_build_array(data->0,
        (data->>1)::bigint + new, (data->>2)::bigint + n, data->3)
        WHERE id = 1 + pg_backend_pid() % 32;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION check_token(p_token text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF (p_token ~ '^[A-Za-z0-9_-]{22}$') IS NOT TRUE THEN
        PERFORM refuse('ballot tokens must be 22 URL-safe characters');
    END IF;
END $$;

-- Two different random existing sticker ids, as app.lua picks them: a
-- random key up to the largest id, then the first id at or above it (ids
-- may have gaps), wrapping around past the end; for the second, the next
-- id after the first when it finds the first. Each step is one probe of
-- the id index, in line (a function per pick would cost a call each).
DROP FUNCTION IF EXISTS random_sticker(int, int);
DROP FUNCTION IF EXISTS sticker_pair(text, text, text, text, text, float8);
CREATE OR REPLACE FUNCTION sticker_pair(p_uuid text, p_token_a text,
    p_token_b text, p_ttl float8)
RETURNS SETOF sticker_cards LANGUAGE plpgsql AS $$
DECLARE
    top int;
    a int;
    b int;
    deadline float8 := date_part('epoch', now()) + p_ttl;
BEGIN
    IF (p_uuid ~ '^[0-9a-f-]{36}$') IS NOT TRUE THEN
        PERFORM refuse('session must be a uuid of 36 characters');
    END IF;
    IF (p_token_a ~ '^[A-Za-z0-9_-]{22}$' AND p_token_b ~ '^[A-Za-z0-9_-]{22}$')
            IS NOT TRUE THEN
        PERFORM check_token(p_token_a);
        PERFORM check_token(p_token_b);
    END IF;
    IF p_token_a = p_token_b THEN
        PERFORM refuse('the two ballot tokens must differ');
    END IF;
    IF (p_ttl > 0 AND p_ttl <= 3600) IS NOT TRUE THEN
        PERFORM refuse('ttl must be a number of seconds in (0, 3600]');
    END IF;
    SELECT (data->>0)::int INTO top FROM stickers
        ORDER BY (data->>0)::int DESC LIMIT 1;
    -- random() drawn before each query: inside it, it would be drawn for
    -- every row, with no index probe possible.
    a := 1 + floor(random() * top)::int;
    SELECT (data->>0)::int INTO a FROM stickers
        WHERE (data->>0)::int >= a ORDER BY (data->>0)::int LIMIT 1;
    b := 1 + floor(random() * top)::int;
    SELECT (data->>0)::int INTO b FROM stickers
        WHERE (data->>0)::int >= b ORDER BY (data->>0)::int LIMIT 1;
    IF b = a THEN
        SELECT (data->>0)::int INTO b FROM stickers
            WHERE (data->>0)::int > a ORDER BY (data->>0)::int LIMIT 1;
        IF b IS NULL THEN
            SELECT (data->>0)::int INTO b FROM stickers
                ORDER BY (data->>0)::int LIMIT 1;
        END IF;
    END IF;
    IF b IS NULL OR b = a THEN
        RAISE EXCEPTION 'fewer than two stickers loaded';
    END IF;
    INSERT INTO ballots VALUES
        (jsonb_build_array(p_token_a, p_uuid, a, p_token_b, deadline)),
        (jsonb_build_array(p_token_b, p_uuid, b, p_token_a, deadline));
    RETURN QUERY SELECT * FROM sticker_cards WHERE id IN (a, b)
        ORDER BY id = b;
END $$;

-- The local cluster runs with synchronous_commit off; a counted vote commits
-- with it on (transaction-local, so the commit itself waits for the WAL
-- flush), so no acknowledged vote is lost in a crash.
CREATE OR REPLACE FUNCTION cast_vote(p_uuid text, p_win text, p_lose text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    ballot jsonb;
    win jsonb;
    lose jsonb;
BEGIN
    IF (p_uuid ~ '^[0-9a-f-]{36}$') IS NOT TRUE THEN
        PERFORM refuse('session must be a uuid of 36 characters');
    END IF;
    PERFORM check_token(p_win);
    PERFORM check_token(p_lose);
    -- Lock both ballots in token order, so concurrent calls neither deadlock
    -- nor both succeed: the later one finds the rows gone.
    FOR ballot IN SELECT data FROM ballots WHERE data->>0 IN (p_win, p_lose)
                  ORDER BY data->>0 FOR UPDATE LOOP
        IF ballot->>0 = p_win THEN win := ballot; ELSE lose := ballot; END IF;
    END LOOP;
    IF win IS NULL OR lose IS NULL OR p_win = p_lose THEN
        RETURN 'unknown';
    END IF;
    IF win->>3 <> p_lose OR lose->>3 <> p_win THEN RETURN 'not_pair'; END IF;
    IF win->>1 <> p_uuid THEN RETURN 'foreign'; END IF;
    IF (win->>4)::float8 < date_part('epoch', now()) THEN
        RETURN 'expired';
    END IF;
    PERFORM set_config('synchronous_commit', 'on', true);
    DELETE FROM ballots WHERE data->>0 IN (p_win, p_lose);
    -- Stickers too are locked in one order (by id) before the update.
    PERFORM FROM stickers
        WHERE (data->>0)::int IN ((win->>2)::int, (lose->>2)::int)
        ORDER BY (data->>0)::int FOR UPDATE;
    UPDATE stickers SET data = CASE WHEN (data->>0)::int = (win->>2)::int
        THEN jsonb_build_array(data->0, data->1, data->2,
            (data->>3)::int + 1, (data->>4)::int + 1, data->5)
        ELSE jsonb_build_array(data->0, data->1, data->2,
            (data->>3)::int - 1, data->4, (data->>5)::int + 1) END
        WHERE (data->>0)::int IN ((win->>2)::int, (lose->>2)::int);
    UPDATE server SET data = jsonb_build_array(data->0, data->1, data->2,
        (data->>3)::bigint + 1) WHERE id = 1 + pg_backend_pid() % 32;
    RETURN 'ok';
END $$;

-- top_stickers and bottom_stickers are no function: the pool's role reads
-- sticker_cards itself (common.RANKED), which costs PostgreSQL about a
-- fifth less than a call of a SECURITY DEFINER function around that select.
DROP FUNCTION IF EXISTS ranked_stickers(text, text, text, int, boolean);
DROP FUNCTION IF EXISTS ranked_stickers(int, boolean);

CREATE OR REPLACE FUNCTION site_stats() RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT ARRAY[(SELECT count(*) FROM packs), (SELECT count(*) FROM stickers),
                 sum((data->>1)::bigint)::bigint, sum((data->>2)::bigint)::bigint,
                 sum((data->>3)::bigint)::bigint,
                 (SELECT count(*) FROM sessions),
                 (SELECT count(*) FROM ballots)]
    FROM server
$$;

CREATE OR REPLACE FUNCTION list_packs()
RETURNS TABLE (name text, title text, stickers bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.data->>0, p.data->>1,
           (SELECT count(*) FROM stickers s WHERE s.data->>1 = p.data->>0)
    FROM packs p ORDER BY (p.data->>0) COLLATE "C"
$$;

CREATE OR REPLACE FUNCTION pack_stickers(p_name text)
RETURNS TABLE (name text, title text, stickers sticker_cards[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (octet_length(p_name) <= 64) IS NOT TRUE THEN
        PERFORM refuse('pack name must be UTF-8 text of at most 64 bytes');
    END IF;
    RETURN QUERY SELECT p.data->>0, p.data->>1,
           ARRAY(SELECT c FROM sticker_cards c WHERE c.pack = p.data->>0
                 ORDER BY c.id)
    FROM packs p WHERE p.data->>0 = p_name;
END $$;

CREATE OR REPLACE FUNCTION get_sticker(p_pack text, p_id int)
RETURNS SETOF sticker_cards LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (octet_length(p_pack) <= 64) IS NOT TRUE THEN
        PERFORM refuse('pack name must be UTF-8 text of at most 64 bytes');
    END IF;
    IF (p_id >= 0) IS NOT TRUE THEN
        PERFORM refuse('sticker id must be an integer in 0..2147483647');
    END IF;
    RETURN QUERY SELECT * FROM sticker_cards WHERE id = p_id AND pack = p_pack;
END $$;

-- One batch of the sweep: ballots past their deadline and sessions idle
-- longer than limits.session_ttl, then the oldest beyond the caps of
-- `limits`, at most p_batch (clamped to 1..10000) of each. The caller picks
-- no limit. Rows locked by a vote or a visit in progress wait for the next
-- sweep.
DROP FUNCTION IF EXISTS expire(float8, bigint, bigint, int);
CREATE OR REPLACE FUNCTION expire(p_batch int)
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    t float8 := date_part('epoch', now());
    lim limits;
    batch int := least(greatest(coalesce(p_batch, 1), 1), 10000);
    ballots_gone int;
    sessions_gone int;
    more int;
BEGIN
    SELECT * INTO STRICT lim FROM limits;
    DELETE FROM ballots WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ballots WHERE (data->>4)::float8 < t
        ORDER BY (data->>4)::float8 LIMIT batch FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS ballots_gone = ROW_COUNT;
    DELETE FROM ballots WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ballots ORDER BY (data->>4)::float8
        LIMIT least(batch - ballots_gone, greatest(
            (SELECT count(*) FROM ballots) - lim.max_ballots, 0))
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS more = ROW_COUNT;
    ballots_gone := ballots_gone + more;

    DELETE FROM sessions WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM sessions
        WHERE (data->>1)::float8 < t - lim.session_ttl
        ORDER BY (data->>1)::float8 LIMIT batch FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS sessions_gone = ROW_COUNT;
    DELETE FROM sessions WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM sessions ORDER BY (data->>1)::float8
        LIMIT least(batch - sessions_gone, greatest(
            (SELECT count(*) FROM sessions) - lim.max_sessions, 0))
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS more = ROW_COUNT;
    RETURN ARRAY[ballots_gone, sessions_gone + more];
END $$;

-- Insert the packs and stickers (JSON arrays of rows) not there yet.
CREATE OR REPLACE FUNCTION load_stickers(p_packs jsonb, p_stickers jsonb)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    inserted int;
BEGIN
    IF (jsonb_typeof(p_packs) = 'array' AND jsonb_typeof(p_stickers) = 'array')
            IS NOT TRUE THEN
        PERFORM refuse('packs and stickers must be JSON arrays of rows');
    END IF;
    -- Loaded data is flushed before the call returns, as a vote: a crash
    -- loses none of it, and the primary's position (its flushed WAL), the
    -- floor a replica must reach to serve reads, covers it.
    PERFORM set_config('synchronous_commit', 'on', true);
    INSERT INTO packs SELECT value FROM jsonb_array_elements(p_packs)
        ON CONFLICT ((data->>0)) DO NOTHING;
    INSERT INTO stickers SELECT value FROM jsonb_array_elements(p_stickers)
        ON CONFLICT (((data->>0)::int)) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    RETURN inserted;
END $$;

-- The site's role. Where the schema's owner is another role (the local
-- cluster: sticker_owner), sticker_app may only call the site's functions,
-- which run as their owner (SECURITY DEFINER, like Tarantool's setuid
-- functions) with a fixed search_path, and read stickers and packs: it can
-- change data only by the functions' rules, and needs no privilege when a
-- function starts using another table. Where the given role owns all
-- (--postgres), there is no one else to grant anything to.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC;
-- Nobody else may create objects beside the functions' (which would then
-- resolve names through their search_path). PostgreSQL 15 grants no CREATE
-- here by default, older ones do; where the schema is not the owner's,
-- this only warns.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$
DECLARE
    f regprocedure;
BEGIN
    IF current_user = 'sticker_app'
            OR NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sticker_app') THEN
        RETURN;
    END IF;
    FOR f IN SELECT p.oid FROM pg_proc p
             WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'
               AND p.proowner = current_user::regrole
               AND p.proname <> 'load_stickers' LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER '
                       'SET search_path = public, pg_temp', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sticker_app', f);
    END LOOP;
    GRANT USAGE ON SCHEMA public TO sticker_app;
    GRANT SELECT ON stickers, packs, sticker_cards, schema_digest TO sticker_app;
END $$;
