-- Today's layout (before schema isolation): workq's migrations 1-16 applied by
-- goose into the public schema, as of main d65dbf7. Generated with
--   pg_dump --schema-only --no-owner --no-privileges, plus the goose_db_version rows
--   (pg_dump --data-only --inserts -t goose_db_version).
-- migrate's legacy upgrade test loads it into an empty database. Do not regenerate:
-- it is the layout that existing databases have.
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: workq_name; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.workq_name AS text
	CONSTRAINT workq_name_check CHECK (((VALUE ~ '^[A-Za-z0-9_.:-]+$'::text) AND (length(VALUE) <= 128)));


--
-- Name: outbox_key_seq(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outbox_key_seq() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    insert into outbox_key_seqs as c (queue, partition_key, last_seq, updated_at)
    values (new.queue, new.partition_key, 1, now())
    on conflict (queue, partition_key) do update set last_seq = c.last_seq + 1, updated_at = now()
    returning c.last_seq into new.key_seq;
    return new;
end
$$;


--
-- Name: outbox_prune_key_seqs(bigint, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outbox_prune_key_seqs(older_than_ms bigint, max_rows integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
declare
    qs text[];
    ks text[];
    n bigint;
begin
    select coalesce(array_agg(c.queue), '{}'), coalesce(array_agg(c.partition_key), '{}') into qs, ks
    from (
        select s.queue, s.partition_key from outbox_key_seqs s
        where s.updated_at < now() - older_than_ms * interval '1 millisecond'
          and not exists (select 1 from outbox o
                          where o.queue = s.queue and o.partition_key = s.partition_key and o.status <> 2)
        limit max_rows
        for update skip locked
    ) c;
    delete from outbox_key_seqs s
    using unnest(qs, ks) as l(queue, partition_key)
    where s.queue = l.queue and s.partition_key = l.partition_key
      and not exists (select 1 from outbox o
                      where o.queue = s.queue and o.partition_key = s.partition_key and o.status <> 2);
    get diagnostics n = row_count;
    return n;
end
$$;


--
-- Name: workq_claim_budget(text, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_claim_budget(p_table text, p_queue text, p_want integer) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
declare
    v_limit  integer;
    v_active integer;
begin
    if exists (select 1 from queue_pauses where work_table = p_table and queue = p_queue) then
        return 0;
    end if;
    select max_in_progress into v_limit
    from queue_limits
    where work_table = p_table and queue = p_queue
    for update;
    if not found then
        return greatest(p_want, 0);
    end if;
    execute format(
        'select count(*) from %I where queue = $1 and status = 1 and locked_until > now()',
        p_table)
    into v_active
    using p_queue;
    return greatest(0, least(p_want, v_limit - v_active));
end
$_$;


--
-- Name: workq_lock_joins(text, bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_lock_joins(p_table text, p_ids bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    v_n integer;
begin
    if p_table <> 'outbox' or coalesce(cardinality(p_ids), 0) = 0 then
        return 0;
    end if;
    -- join_id never changes (outbox_join_fixed), so any version of the
    -- rows gives it; rows outside joins give null, which matches no join.
    -- The rows are read by primary key: no "join_id is not null" here, which
    -- would let stale statistics (no members yet) pick the partial index
    -- outbox_join and read every member in flight. The lock rows node above
    -- the sort locks in join id order.
    select count(*) into v_n from (
        select j.id from outbox_joins j
        where j.id = any(array(select m.join_id from outbox m where m.id = any(p_ids)))
        order by j.id
        for no key update of j
    ) l;
    return v_n;
end
$$;


--
-- Name: workq_outbox_join_attach(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_outbox_join_attach() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    j outbox_joins%rowtype;
begin
    if new.status >= 2 then
        raise exception 'workq: outbox message joins join % already finished', new.join_id
            using errcode = 'WQJ04';
    end if;
    update outbox_joins set attached_steps = attached_steps + 1, updated_at = now()
    where id = new.join_id and status = 0 and attached_steps < expected_steps;
    if found then
        return null;
    end if;
    select * into j from outbox_joins where id = new.join_id;
    if not found then
        raise exception 'workq: join % does not exist', new.join_id using errcode = 'WQJ01';
    elsif j.status <> 0 then
        raise exception 'workq: join % has ended (%)', new.join_id,
            case when j.status = 2 then 'completed' else 'failed: ' || j.fail_reason end
            using errcode = 'WQJ02';
    end if;
    raise exception 'workq: join % already has all % of its members', new.join_id, j.expected_steps
        using errcode = 'WQJ03';
end
$$;


--
-- Name: workq_outbox_join_count(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_outbox_join_count() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    v_sign integer := case when new.status >= 2 then 1 else -1 end;
    v_status smallint := case when new.status >= 2 then new.status else old.status end;
    j outbox_joins%rowtype;
begin
    update outbox_joins set
        completed_steps = completed_steps + case when v_status = 2 then v_sign else 0 end,
        failed_steps = failed_steps + case when v_status = 3 then v_sign else 0 end,
        updated_at = now()
    where id = new.join_id
    returning * into j;
    if not found or j.status <> 0 or v_sign < 0 then
        return null;
    end if;
    if j.failed_steps > 0 and j.on_member_failure = 2 then
        perform workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
    elsif j.completed_steps + j.failed_steps >= j.expected_steps then
        if j.failed_steps > 0 and j.on_member_failure > 0 then
            perform workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
        else
            perform workq_outbox_join_finish(j.id, 2::smallint, null);
        end if;
    end if;
    return null;
end
$$;


--
-- Name: workq_outbox_join_deleted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_outbox_join_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    j outbox_joins%rowtype;
begin
    update outbox_joins set failed_steps = failed_steps + 1, updated_at = now()
    where id = old.join_id
    returning * into j;
    if not found or j.status <> 0 then
        return null;
    end if;
    if j.on_member_failure = 2
       or (j.completed_steps + j.failed_steps >= j.expected_steps and j.on_member_failure = 1) then
        perform workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
    elsif j.completed_steps + j.failed_steps >= j.expected_steps then
        perform workq_outbox_join_finish(j.id, 2::smallint, null);
    end if;
    return null;
end
$$;


--
-- Name: workq_outbox_join_finish(bigint, smallint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_outbox_join_finish(p_id bigint, p_status smallint, p_reason text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
declare
    j outbox_joins%rowtype;
    v_ok boolean;
begin
    update outbox_joins set
        status = p_status,
        fail_reason = p_reason,
        finished_at = now(),
        updated_at = now(),
        outcome_message_id = case when p_status = 2 or on_fail_topic is not null then gen_random_uuid() end
    where id = p_id and status = 0
    returning * into j;
    if not found then
        return false;
    end if;
    if j.outcome_message_id is null then
        return true;
    end if;
    v_ok := p_status = 2;
    insert into outbox (queue, topic, partition_key, message_id, payload, headers, correlation_id)
    values (
        case when v_ok then j.on_complete_queue else j.on_fail_queue end,
        case when v_ok then j.on_complete_topic else j.on_fail_topic end,
        case when v_ok then j.on_complete_partition_key else j.on_fail_partition_key end,
        j.outcome_message_id,
        case when v_ok then j.on_complete_payload else j.on_fail_payload end,
        (case when v_ok then j.on_complete_headers else j.on_fail_headers end)
            || jsonb_build_object('workq-join-id', j.id::text,
                                  'workq-join-outcome', coalesce(p_reason, 'completed')),
        case when v_ok then j.on_complete_correlation_id else j.on_fail_correlation_id end);
    -- Wake the relay of that queue as an enqueue does (channel workq_outbox,
    -- payload the queue name).
    perform pg_notify('workq_outbox', case when v_ok then j.on_complete_queue else j.on_fail_queue end);
    return true;
end
$$;


--
-- Name: workq_outbox_join_fixed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_outbox_join_fixed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    raise exception 'workq: the join of outbox message % cannot change (attach members when they are written)', old.id
        using errcode = 'WQJ05';
end
$$;


--
-- Name: workq_run_id(text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_run_id(p_table text, p_id bigint, p_lease_version bigint) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select encode(
        int8send(((p_id >> 12) << 16) | 32768 | (p_id & 4095))
        || int8send((-9223372036854775808)::bigint
                    | (workq_table_code(p_table) << 56)
                    | (p_lease_version & 72057594037927935)),
        'hex')::uuid
$$;


--
-- Name: workq_table_code(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_table_code(p_table text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select case p_table
        when 'job_runs' then 0
        when 'outbox' then 1
        when 'inbox' then 2
        when 'timers' then 3
        else workq_unknown_table(p_table) end
$$;


--
-- Name: workq_unknown_table(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.workq_unknown_table(p_table text) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
    raise exception 'workq: unknown work table %', p_table
        using hint = 'register the table in workq_table_code (db/migrations) and in package lease';
end
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: goose_db_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.goose_db_version (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);


--
-- Name: goose_db_version_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.goose_db_version ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.goose_db_version_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: inbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.inbox (
    id bigint NOT NULL,
    queue public.workq_name DEFAULT 'default'::text NOT NULL,
    source text NOT NULL,
    message_id text NOT NULL,
    topic text,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    payload_hash bytea NOT NULL,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    status smallint DEFAULT 0 NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    owner_token uuid,
    locked_until timestamp with time zone,
    lease_version bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 4 NOT NULL,
    claimed_at timestamp with time zone,
    claimed_by text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT inbox_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT inbox_lease_ck CHECK (((status = 1) = (owner_token IS NOT NULL))),
    CONSTRAINT inbox_lease_pair_ck CHECK (((owner_token IS NULL) = (locked_until IS NULL))),
    CONSTRAINT inbox_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT inbox_message_id_check CHECK (((length(message_id) >= 1) AND (length(message_id) <= 512))),
    CONSTRAINT inbox_source_check CHECK (((length(source) >= 1) AND (length(source) <= 256))),
    CONSTRAINT inbox_status_check CHECK (((status >= 0) AND (status <= 3)))
)
WITH (fillfactor='75');


--
-- Name: inbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.inbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.inbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 1152921504606846975
    CACHE 1
);


--
-- Name: job_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_runs (
    id bigint NOT NULL,
    queue public.workq_name DEFAULT 'default'::text NOT NULL,
    kind public.workq_name NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    dedup_key text,
    schedule_id bigint,
    scheduled_time timestamp with time zone,
    status smallint DEFAULT 0 NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    owner_token uuid,
    locked_until timestamp with time zone,
    lease_version bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 4 NOT NULL,
    claimed_at timestamp with time zone,
    claimed_by text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    metadata jsonb,
    CONSTRAINT job_runs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT job_runs_dedup_key_check CHECK (((length(dedup_key) >= 1) AND (length(dedup_key) <= 512))),
    CONSTRAINT job_runs_lease_ck CHECK (((status = 1) = (owner_token IS NOT NULL))),
    CONSTRAINT job_runs_lease_pair_ck CHECK (((owner_token IS NULL) = (locked_until IS NULL))),
    CONSTRAINT job_runs_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT job_runs_status_check CHECK (((status >= 0) AND (status <= 3)))
)
WITH (fillfactor='75');


--
-- Name: job_runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.job_runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.job_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 1152921504606846975
    CACHE 1
);


--
-- Name: outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    queue public.workq_name DEFAULT 'default'::text NOT NULL,
    topic text NOT NULL,
    partition_key text COLLATE pg_catalog."C",
    message_id uuid DEFAULT gen_random_uuid() NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    correlation_id text,
    status smallint DEFAULT 0 NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    owner_token uuid,
    locked_until timestamp with time zone,
    lease_version bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 4 NOT NULL,
    claimed_at timestamp with time zone,
    claimed_by text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    join_id bigint,
    key_seq bigint,
    CONSTRAINT outbox_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT outbox_headers_check CHECK ((jsonb_typeof(headers) = 'object'::text)),
    CONSTRAINT outbox_lease_ck CHECK (((status = 1) = (owner_token IS NOT NULL))),
    CONSTRAINT outbox_lease_pair_ck CHECK (((owner_token IS NULL) = (locked_until IS NULL))),
    CONSTRAINT outbox_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT outbox_partition_key_check CHECK (((length(partition_key) >= 1) AND (length(partition_key) <= 256))),
    CONSTRAINT outbox_status_check CHECK (((status >= 0) AND (status <= 3))),
    CONSTRAINT outbox_topic_check CHECK (((length(topic) >= 1) AND (length(topic) <= 256)))
)
WITH (fillfactor='75');


--
-- Name: outbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 1152921504606846975
    CACHE 1
);


--
-- Name: outbox_joins; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_joins (
    id bigint NOT NULL,
    expected_steps integer NOT NULL,
    completed_steps integer DEFAULT 0 NOT NULL,
    failed_steps integer DEFAULT 0 NOT NULL,
    status smallint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    attached_steps integer DEFAULT 0 NOT NULL,
    on_member_failure smallint DEFAULT 0 NOT NULL,
    deadline timestamp with time zone,
    fail_reason text,
    outcome_message_id uuid,
    on_complete_queue public.workq_name DEFAULT 'default'::text NOT NULL,
    on_complete_topic text NOT NULL,
    on_complete_payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    on_complete_headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    on_complete_partition_key text,
    on_complete_correlation_id text,
    on_fail_queue public.workq_name DEFAULT 'default'::text NOT NULL,
    on_fail_topic text,
    on_fail_payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    on_fail_headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    on_fail_partition_key text,
    on_fail_correlation_id text,
    CONSTRAINT outbox_joins_counts_ck CHECK (((completed_steps >= 0) AND (failed_steps >= 0) AND ((attached_steps >= 0) AND (attached_steps <= expected_steps)))),
    CONSTRAINT outbox_joins_expected_steps_check CHECK ((expected_steps > 0)),
    CONSTRAINT outbox_joins_fail_reason_check CHECK ((fail_reason = ANY (ARRAY['member_failed'::text, 'deadline'::text]))),
    CONSTRAINT outbox_joins_final_ck CHECK (((status >= 2) = (finished_at IS NOT NULL))),
    CONSTRAINT outbox_joins_on_complete_headers_check CHECK ((jsonb_typeof(on_complete_headers) = 'object'::text)),
    CONSTRAINT outbox_joins_on_complete_partition_key_check CHECK (((length(on_complete_partition_key) >= 1) AND (length(on_complete_partition_key) <= 256))),
    CONSTRAINT outbox_joins_on_complete_payload_check CHECK ((jsonb_typeof(on_complete_payload) = 'object'::text)),
    CONSTRAINT outbox_joins_on_complete_topic_check CHECK (((length(on_complete_topic) >= 1) AND (length(on_complete_topic) <= 256))),
    CONSTRAINT outbox_joins_on_fail_headers_check CHECK ((jsonb_typeof(on_fail_headers) = 'object'::text)),
    CONSTRAINT outbox_joins_on_fail_partition_key_check CHECK (((length(on_fail_partition_key) >= 1) AND (length(on_fail_partition_key) <= 256))),
    CONSTRAINT outbox_joins_on_fail_payload_check CHECK ((jsonb_typeof(on_fail_payload) = 'object'::text)),
    CONSTRAINT outbox_joins_on_fail_topic_check CHECK (((length(on_fail_topic) >= 1) AND (length(on_fail_topic) <= 256))),
    CONSTRAINT outbox_joins_on_member_failure_check CHECK (((on_member_failure >= 0) AND (on_member_failure <= 2))),
    CONSTRAINT outbox_joins_reason_ck CHECK (((status = 3) = (fail_reason IS NOT NULL))),
    CONSTRAINT outbox_joins_status_check CHECK (((status >= 0) AND (status <= 3))),
    CONSTRAINT outbox_joins_status_ck CHECK ((status = ANY (ARRAY[0, 2, 3])))
);


--
-- Name: outbox_joins_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.outbox_joins ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_joins_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: outbox_key_seqs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_key_seqs (
    queue text NOT NULL,
    partition_key text NOT NULL COLLATE pg_catalog."C",
    last_seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
)
WITH (fillfactor='70');


--
-- Name: queue_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.queue_limits (
    work_table text NOT NULL,
    queue public.workq_name NOT NULL,
    max_in_progress integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_limits_max_in_progress_check CHECK ((max_in_progress >= 0)),
    CONSTRAINT queue_limits_work_table_check CHECK ((public.workq_table_code(work_table) >= 0))
);


--
-- Name: queue_pauses; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.queue_pauses (
    work_table text NOT NULL,
    queue public.workq_name NOT NULL,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    paused_by text NOT NULL,
    reason text,
    CONSTRAINT queue_pauses_paused_by_check CHECK (((length(paused_by) >= 1) AND (length(paused_by) <= 256))),
    CONSTRAINT queue_pauses_reason_check CHECK ((length(reason) <= 1024)),
    CONSTRAINT queue_pauses_work_table_check CHECK ((public.workq_table_code(work_table) >= 0))
);


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    run_id uuid NOT NULL,
    work_table text NOT NULL,
    item_id bigint NOT NULL,
    queue text NOT NULL,
    attempt integer NOT NULL,
    lease_version bigint NOT NULL,
    owner_token uuid NOT NULL,
    worker_id text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    outcome text NOT NULL,
    error text,
    CONSTRAINT runs_outcome_check CHECK ((outcome = ANY (ARRAY['done'::text, 'retry'::text, 'failed'::text, 'released'::text, 'snoozed'::text, 'expired'::text, 'revived'::text, 'cancelled'::text]))),
    CONSTRAINT runs_work_table_check CHECK ((public.workq_table_code(work_table) >= 0))
);


--
-- Name: schedules; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schedules (
    id bigint NOT NULL,
    name public.workq_name NOT NULL,
    queue public.workq_name DEFAULT 'default'::text NOT NULL,
    kind public.workq_name NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    cron text NOT NULL,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 4 NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    next_run_at timestamp with time zone,
    last_run_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    overlap text DEFAULT 'allow'::text NOT NULL,
    misfire text DEFAULT 'run_once'::text NOT NULL,
    misfire_cap integer DEFAULT 100 NOT NULL,
    last_run_id bigint,
    skipped_runs bigint DEFAULT 0 NOT NULL,
    last_skipped_at timestamp with time zone,
    CONSTRAINT schedules_cron_length CHECK (((length(cron) >= 1) AND (length(cron) <= 256))),
    CONSTRAINT schedules_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT schedules_misfire_cap_check CHECK (((misfire_cap >= 1) AND (misfire_cap <= 10000))),
    CONSTRAINT schedules_misfire_check CHECK ((misfire = ANY (ARRAY['run_once'::text, 'skip'::text, 'run_all'::text]))),
    CONSTRAINT schedules_overlap_check CHECK ((overlap = ANY (ARRAY['allow'::text, 'skip'::text]))),
    CONSTRAINT schedules_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT schedules_timezone_length CHECK (((length(timezone) >= 1) AND (length(timezone) <= 64)))
);


--
-- Name: schedules_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.schedules ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.schedules_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: timers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.timers (
    id bigint NOT NULL,
    queue public.workq_name DEFAULT 'default'::text NOT NULL,
    topic text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    due_time timestamp with time zone NOT NULL,
    status smallint DEFAULT 0 NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    run_at timestamp with time zone NOT NULL,
    owner_token uuid,
    locked_until timestamp with time zone,
    lease_version bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 4 NOT NULL,
    claimed_at timestamp with time zone,
    claimed_by text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    cancelled_at timestamp with time zone,
    CONSTRAINT timers_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT timers_lease_ck CHECK (((status = 1) = (owner_token IS NOT NULL))),
    CONSTRAINT timers_lease_pair_ck CHECK (((owner_token IS NULL) = (locked_until IS NULL))),
    CONSTRAINT timers_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT timers_status_check CHECK (((status >= 0) AND (status <= 3))),
    CONSTRAINT timers_topic_check CHECK (((length(topic) >= 1) AND (length(topic) <= 256)))
)
WITH (fillfactor='75');


--
-- Name: timers_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.timers ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.timers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 1152921504606846975
    CACHE 1
);


--
-- Name: workq_locks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workq_locks (
    name public.workq_name NOT NULL,
    owner text NOT NULL,
    token bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    acquired_at timestamp with time zone NOT NULL,
    renewed_at timestamp with time zone NOT NULL,
    CONSTRAINT workq_locks_owner_check CHECK (((length(owner) >= 1) AND (length(owner) <= 256))),
    CONSTRAINT workq_locks_token_check CHECK ((token > 0))
);


--
-- Name: goose_db_version goose_db_version_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.goose_db_version
    ADD CONSTRAINT goose_db_version_pkey PRIMARY KEY (id);


--
-- Name: inbox inbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox
    ADD CONSTRAINT inbox_pkey PRIMARY KEY (id);


--
-- Name: inbox inbox_source_message; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.inbox
    ADD CONSTRAINT inbox_source_message UNIQUE (source, message_id);


--
-- Name: job_runs job_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id);


--
-- Name: outbox_joins outbox_joins_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_joins
    ADD CONSTRAINT outbox_joins_pkey PRIMARY KEY (id);


--
-- Name: outbox_key_seqs outbox_key_seqs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_key_seqs
    ADD CONSTRAINT outbox_key_seqs_pkey PRIMARY KEY (queue, partition_key);


--
-- Name: outbox outbox_message_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_message_id_key UNIQUE (message_id);


--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);


--
-- Name: queue_limits queue_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.queue_limits
    ADD CONSTRAINT queue_limits_pkey PRIMARY KEY (work_table, queue);


--
-- Name: queue_pauses queue_pauses_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.queue_pauses
    ADD CONSTRAINT queue_pauses_pkey PRIMARY KEY (work_table, queue);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);


--
-- Name: schedules schedules_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schedules
    ADD CONSTRAINT schedules_name_key UNIQUE (name);


--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (id);


--
-- Name: timers timers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.timers
    ADD CONSTRAINT timers_pkey PRIMARY KEY (id);


--
-- Name: workq_locks workq_locks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workq_locks
    ADD CONSTRAINT workq_locks_pkey PRIMARY KEY (name);


--
-- Name: inbox_claim; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_claim ON public.inbox USING btree (queue, run_at, id) WHERE (status = 0);


--
-- Name: inbox_failed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_failed ON public.inbox USING btree (id) WHERE (status = 3);


--
-- Name: inbox_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_finished ON public.inbox USING btree (finished_at) WHERE (status >= 2);


--
-- Name: inbox_in_progress; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX inbox_in_progress ON public.inbox USING btree (id) WHERE (status = 1);


--
-- Name: job_runs_claim; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_claim ON public.job_runs USING btree (queue, priority DESC, run_at, id) WHERE (status = 0);


--
-- Name: job_runs_dedup; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX job_runs_dedup ON public.job_runs USING btree (dedup_key) WHERE ((dedup_key IS NOT NULL) AND (status < 2));


--
-- Name: job_runs_failed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_failed ON public.job_runs USING btree (id) WHERE (status = 3);


--
-- Name: job_runs_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_finished ON public.job_runs USING btree (finished_at) WHERE (status >= 2);


--
-- Name: job_runs_in_progress; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_in_progress ON public.job_runs USING btree (id) WHERE (status = 1);


--
-- Name: job_runs_schedule_slot; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX job_runs_schedule_slot ON public.job_runs USING btree (schedule_id, scheduled_time) WHERE (schedule_id IS NOT NULL);


--
-- Name: outbox_claim; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_claim ON public.outbox USING btree (queue, priority DESC, id) WHERE ((status = 0) AND (partition_key IS NULL));


--
-- Name: outbox_failed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_failed ON public.outbox USING btree (id) WHERE (status = 3);


--
-- Name: outbox_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_finished ON public.outbox USING btree (finished_at) WHERE ((status = 2) OR ((status = 3) AND (partition_key IS NULL)));


--
-- Name: outbox_in_progress; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_in_progress ON public.outbox USING btree (id) WHERE (status = 1);


--
-- Name: outbox_join; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_join ON public.outbox USING btree (join_id) WHERE (join_id IS NOT NULL);


--
-- Name: outbox_joins_deadline; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_joins_deadline ON public.outbox_joins USING btree (deadline) WHERE ((status = 0) AND (deadline IS NOT NULL));


--
-- Name: outbox_key_in_flight; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX outbox_key_in_flight ON public.outbox USING btree (queue, partition_key) WHERE ((owner_token IS NOT NULL) AND (partition_key IS NOT NULL));


--
-- Name: outbox_ordered; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX outbox_ordered ON public.outbox USING btree (queue, partition_key, key_seq) WHERE ((partition_key IS NOT NULL) AND (status <> 2));


--
-- Name: runs_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_finished ON public.runs USING btree (finished_at);


--
-- Name: schedules_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX schedules_due ON public.schedules USING btree (next_run_at) WHERE enabled;


--
-- Name: timers_claim; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_claim ON public.timers USING btree (queue, run_at, id) WHERE (status = 0);


--
-- Name: timers_failed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_failed ON public.timers USING btree (id) WHERE (status = 3);


--
-- Name: timers_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_finished ON public.timers USING btree (finished_at) WHERE (status >= 2);


--
-- Name: timers_in_progress; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX timers_in_progress ON public.timers USING btree (id) WHERE (status = 1);


--
-- Name: outbox outbox_join_attach; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER outbox_join_attach AFTER INSERT ON public.outbox FOR EACH ROW WHEN ((new.join_id IS NOT NULL)) EXECUTE FUNCTION public.workq_outbox_join_attach();


--
-- Name: outbox outbox_join_count; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER outbox_join_count AFTER UPDATE OF status ON public.outbox FOR EACH ROW WHEN (((new.join_id IS NOT NULL) AND ((new.status >= 2) <> (old.status >= 2)))) EXECUTE FUNCTION public.workq_outbox_join_count();


--
-- Name: outbox outbox_join_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER outbox_join_deleted AFTER DELETE ON public.outbox FOR EACH ROW WHEN (((old.join_id IS NOT NULL) AND (old.status < 2))) EXECUTE FUNCTION public.workq_outbox_join_deleted();


--
-- Name: outbox outbox_join_fixed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER outbox_join_fixed BEFORE UPDATE OF join_id ON public.outbox FOR EACH ROW WHEN ((old.join_id IS DISTINCT FROM new.join_id)) EXECUTE FUNCTION public.workq_outbox_join_fixed();


--
-- Name: outbox outbox_key_seq; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER outbox_key_seq BEFORE INSERT ON public.outbox FOR EACH ROW WHEN (((new.partition_key IS NOT NULL) AND (new.key_seq IS NULL))) EXECUTE FUNCTION public.outbox_key_seq();


--
-- Name: job_runs job_runs_schedule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_runs
    ADD CONSTRAINT job_runs_schedule_id_fkey FOREIGN KEY (schedule_id) REFERENCES public.schedules(id) ON DELETE SET NULL;


--
-- PostgreSQL database dump complete
--


--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)


--
-- Data for Name: goose_db_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.goose_db_version VALUES (1, 0, true, '2026-11-28 01:53:55.328612');
INSERT INTO public.goose_db_version VALUES (2, 1, true, '2026-11-28 01:53:55.365641');
INSERT INTO public.goose_db_version VALUES (3, 2, true, '2026-11-28 01:53:55.556915');
INSERT INTO public.goose_db_version VALUES (4, 3, true, '2026-11-28 01:53:55.560386');
INSERT INTO public.goose_db_version VALUES (5, 4, true, '2026-11-28 01:53:55.580749');
INSERT INTO public.goose_db_version VALUES (6, 5, true, '2026-11-28 01:53:55.6327');
INSERT INTO public.goose_db_version VALUES (7, 6, true, '2026-11-28 01:53:55.636321');
INSERT INTO public.goose_db_version VALUES (8, 7, true, '2026-11-28 01:53:55.638485');
INSERT INTO public.goose_db_version VALUES (9, 9, true, '2026-11-28 01:53:55.645545');
INSERT INTO public.goose_db_version VALUES (10, 10, true, '2026-11-28 01:53:55.656463');
INSERT INTO public.goose_db_version VALUES (11, 11, true, '2026-11-28 01:53:55.66846');
INSERT INTO public.goose_db_version VALUES (12, 12, true, '2026-11-28 01:53:55.684349');
INSERT INTO public.goose_db_version VALUES (13, 13, true, '2026-11-28 01:53:55.691204');
INSERT INTO public.goose_db_version VALUES (14, 14, true, '2026-11-28 01:53:55.729326');
INSERT INTO public.goose_db_version VALUES (15, 15, true, '2026-11-28 01:53:55.730887');
INSERT INTO public.goose_db_version VALUES (16, 16, true, '2026-11-28 01:53:55.792293');


--
-- Name: goose_db_version_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.goose_db_version_id_seq', 16, true);


--
-- PostgreSQL database dump complete
--


