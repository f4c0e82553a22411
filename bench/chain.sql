-- The chained floor of bench/database.py: the least any queue can do that
-- keeps what storm-queue keeps, one hash-chained log in total order under one
-- lock, with a fencing token on every lease, in one round trip per request.
-- Every request is one call: chain_claim(holder) or chain_finish(job, token,
-- result), each one transaction (the caller is in autocommit) that takes the
-- advisory lock, plans, writes its log line chained to the last
-- (sha256(prev || body)), moves the head and answers.

CREATE TABLE chain_job (
    id bigserial PRIMARY KEY,
    state text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done')),
    holder text,
    token bigint,            -- the fencing token: the seq of the claim's log line
    result text
);

CREATE TABLE chain_log (
    seq bigint PRIMARY KEY,
    body text NOT NULL,      -- the request's JSON (json_build_object)
    digest text NOT NULL     -- sha256(the previous line's digest || body), hex
);

CREATE TABLE chain_head (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq bigint NOT NULL,
    digest text NOT NULL
);

INSERT INTO chain_head (seq, digest) VALUES (0, repeat('0', 64));

-- Lease the first ready job by id to HOLDER; the claimed row (its token is
-- the claim line's seq), or no row when none is ready (nothing is logged).
CREATE FUNCTION chain_claim(p_holder text) RETURNS SETOF chain_job
LANGUAGE plpgsql AS $$
DECLARE
    head chain_head;
    job chain_job;
    v_line text;
    v_digest text;
BEGIN
    PERFORM pg_advisory_xact_lock(7406);
    SELECT * INTO job FROM chain_job WHERE state = 'ready' ORDER BY id LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO head FROM chain_head;
    v_line := json_build_object('seq', head.seq + 1, 'action', 'claim', 'job', job.id,
                              'holder', p_holder, 'token', head.seq + 1,
                              'at', clock_timestamp(), 'prev', head.digest)::text;
    v_digest := encode(sha256(convert_to(head.digest || v_line, 'UTF8')), 'hex');
    INSERT INTO chain_log (seq, body, digest) VALUES (head.seq + 1, v_line, v_digest);
    UPDATE chain_head SET seq = head.seq + 1, digest = v_digest;
    UPDATE chain_job SET state = 'running', holder = p_holder, token = head.seq + 1
        WHERE id = job.id RETURNING * INTO job;
    RETURN NEXT job;
END
$$;

-- Finish JOB under TOKEN with RESULT; true when done, false (and a
-- 'refused' line) when TOKEN is not the job's current lease (fencing).
CREATE FUNCTION chain_finish(p_job bigint, p_token bigint, p_result text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    head chain_head;
    ok boolean;
    v_line text;
    v_digest text;
BEGIN
    PERFORM pg_advisory_xact_lock(7406);
    SELECT * INTO head FROM chain_head;
    ok := EXISTS (SELECT 1 FROM chain_job WHERE id = p_job AND state = 'running' AND token = p_token);
    v_line := json_build_object('seq', head.seq + 1, 'action', CASE WHEN ok THEN 'finish' ELSE 'refused' END,
                              'job', p_job, 'token', p_token, 'result', p_result,
                              'at', clock_timestamp(), 'prev', head.digest)::text;
    v_digest := encode(sha256(convert_to(head.digest || v_line, 'UTF8')), 'hex');
    INSERT INTO chain_log (seq, body, digest) VALUES (head.seq + 1, v_line, v_digest);
    UPDATE chain_head SET seq = head.seq + 1, digest = v_digest;
    IF ok THEN
        UPDATE chain_job SET state = 'done', result = p_result WHERE id = p_job;
    END IF;
    RETURN ok;
END
$$;
