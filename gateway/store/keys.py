"""Every store key and channel name chatgate uses, built in one place.

The store adds its own namespace (`{prefix}:k:` on Redis, see gateway/store/redis.py; on
Redis Cluster a hash tag too for the keys scripts touch together, see RedisKeys in
gateway/store/redis_base.py), so these are the names inside it. They are part of the data
format: a deployment upgraded in place reads what the previous version wrote, so a name
here changes only together with a migration.

"Sealed" values are JSON `{"v": value, "mac": HMAC}` under the gateway's own key
(gateway/approvals/seals.py); one that does not verify is ignored.

Schema (`{session}` is a SessionKey as text, e.g. `telegram:-100123:t7`;
`{chat}` a ChatRef address such as `slack:C0123/1700000000.1`):

    session:{session}                 value  a session's history record (JSON)
    chat_sessions:{platform}:{chat}   hash   sessions of a chat -> creation time (for /forget)
    approved_shapes:{session}         hash   "for this session" grants: a digest of (person, tool,
                                             shape) -> the sealed grant (approvals/grants.py)
    standing_grants:{platform}:{chat} hash   "always in this chat" grants, the same way
    grant_epoch:{grants hash}         value  the sealed epoch of a place's grants (one of the two
                                             hashes above): only grants made in it count
    context:{chat}                    list   recent group messages not addressed to the bot
    seen:{platform}:{event_id}        value  a platform event already taken (dedupe)
    refused:{chat}:{user_id}          value  a refusal was told to this person here this hour
    rate:{user}:{minute}              value  messages counted this minute (replicas only)
    ratelimited:{user}:{minute}       value  the rate-limit notice was sent this minute
    memory:chat:{platform}:{chat_id}  value  the chat's notes (JSON list)
    memory:user:{platform}:{user_id}  value  a person's notes (JSON list)
    todo:{session}                    value  the session's todo list (JSON)
    background_tasks                  hash   background sub-agent tasks: id -> record (JSON,
                                             tools/agent/background.py)
    pending:{session}                 list   messages stored at intake, waiting for their turn
                                             (`{entry_id}\n{json}`, oldest first)
    sessions:ready                    zset/hash  sessions with pending messages -> first queued
    sessions:started                  hash   entry id -> attempts (a second one is a re-run)
    pending:total                     value  pending messages across all sessions
                                             (these three: once per queue shard on Cluster)
    reply:{turn_id}                   value  the reply a turn sent (at most once per turn)
    noticed:{lease owner}             value  the "answer after this" notice was sent for a turn
    replicas                          hash   instance id -> last heartbeat (unix time)
    wipe_offer:{token}                value  /forget's offer to delete a chat's workspace files
    approval:{id}                     value  an approval request (sealed JSON)
    approvals:pending                 hash   pending request id -> expiry
    approvals:audit                   list   decisions, newest last
    alive:{instance}                  value  heartbeat of a running gateway process
    {namespace}:answer:{tag}          value  a sealed Rendezvous answer (approvals, clarify);
                                             the tag is an HMAC of the id (approvals/seals.py)
    clarify:open:{session}            value  the question a session's turn is waiting on
    clarify:question:{id}             value  an open question (JSON)
    cron:jobs / cron:state            hash   job specs / run state by job id
    cron:runs:{job}                   list   a job's run log
    cron:fired:{job}:{slot}[:{what}]  value  a run slot (or its report) was claimed, once
    cron:running:{job}:{slot}         value  a run in progress
    {platform}:thread:{chat}:{thread} value  a platform thread the bot takes part in
    {platform}:conversation:{id}      value  where replies to a conversation go (Teams: its
                                             serviceUrl and tenant; `user:{user id}`: that
                                             person's personal chat; sealed JSON)
    {platform}:file_offer:{id}        value  a file offered for upload until it is accepted
                                             (Teams file consent; sealed JSON)
    discord:received / mattermost:received
                                      hash   event id -> a message received on the gateway or
                                             WebSocket, not yet through intake (JSON)
    telegram:received                 hash   update id -> a webhook update answered 200 and not yet
                                             through intake (`{owner}\n{time}\n{body}`)
    mattermost:socket                 value  the Mattermost WebSocket's connection id and next
                                             sequence number, to resume it (JSON)
    whatsapp:window:{number}          value  a WhatsApp number's last message (time, id): its
                                             24-hour window (adapters/whatsapp/window.py)
    whatsapp:status:{message id}      value  the latest delivery status of a sent message
    whatsapp:sent:{message id}        value  a free-form message's recipient and text, for an
                                             hour (sent again as the template after a 131047)
    {platform}:prompt:{message}       value  a message's buttons offered as reactions: emoji -> data
                                             (JSON; Matrix)
    {platform}:cursor:{account}       value  where an account's event stream was read up to (the
                                             Matrix sync token past the stored events)
    chats                             hash   chat scope -> when it was last active (console)
    errors:recent                     list   recent warnings and errors of every replica (JSON)
    web:session:{digest}              value  a signed-in browser (console or web chat; sealed JSON)
    web:signin:{area}:{client}:{minute}
                                      value  sign-in attempts from one address this minute in
                                             one area (`/admin`, `/chat`)
    web:link:{digest}                 value  a one-time web chat sign-in link -> user name (sealed)
    web:messages:{chat}               hash   message id -> a web chat or API message (JSON)
    web:conversations:{user}          hash   conversation id -> title and times (JSON)
    web:file:{id}                     value  a file uploaded to or sent in the web chat (JSON)
    api:open:{session}                hash   message id -> API request: replies nobody has read
    api:live:{request}                value  a client is waiting for this API request's answer
    relayed:{approval id}             value  an API session's approval went to the admins
    homes                             hash   home channel name -> the chat (ChatRef JSON), /sethome
    pairing:codes                     hash   pairing code -> the sealed request (who, where, expiry)
    pairing:grants                    hash   person's address -> their sealed pairing grant
    pairing:user:{address}            value  the person's live pairing code
    pairing:decided:{code}            value  the code's one decision was taken
    pairing:denied:{address}          value  the person was denied; refused, not asked about again
    model_choice:{session}            value  the model /model chose for a session ("provider/model")
    usage:{period}:{dim}:{id}:{unit}  value  what turns used in a period: `in` / `out` tokens, `usd`
                                             in micro-dollars. period `d2025-01-31` or `m2025-01`;
                                             dim user | chat | job | profile | model | all
    usage_index:{period}              hash   "{dim}:{id}" -> "1": who has usage in the period
    budget_notice:{period}:{dim}:{id}:{level}
                                      value  a budget warning (level `warn`, `limit`) was given
    skills:index                      hash   skill name -> metadata JSON (author, times, digest)
    skill:{name}:{digest}             hash   a skill's files (that version): relative path -> text
    skills:version                    value  counter bumped on every skill change (replicas sync)
    retention:run:{period}            value  a retention sweep was claimed for this period, once

Search index of past conversations (gateway/store/search*.py; one document per turn, `{doc}`
is the turn id). Redis keeps an inverted index; the embedded store keeps the same documents in
SQLite tables (`search_docs`, FTS5 `search_fts`) instead of these keys:

    search:doc:{doc}                  value  a turn's document (JSON: session, chat, time, terms)
    search:chat:{platform}:{chat}     zset   the chat's documents by time
    search:session:{session}          zset   the session's documents by time
    search:term:{platform}:{chat}:{t} zset   the chat's documents containing term t, by time
    search:allterm:{t}                zset   every document containing term t, by time
    search:chats / search:sessions    zset   chats / sessions by their newest document

Leases (`acquire_lease` names, their own namespace in the store):

    lease:session:{session}           one turn at a time per session
    leader:{name}                     the one process that runs a singleton (polling, scheduler)

Channels (`publish` / `listen`): `control` (stop a turn in another process),
`{namespace}:answers` (a Rendezvous answer was written), `cron` (a job changed),
`web:events` / `api:events` (a web chat / API message was sent or edited).
"""

from __future__ import annotations

from gateway.sessions.key import SessionKey

CONTROL_CHANNEL = "control"
CRON_CHANNEL = "cron"
APPROVALS_PENDING = "approvals:pending"
APPROVALS_AUDIT = "approvals:audit"
CRON_JOBS = "cron:jobs"
CRON_STATE = "cron:state"
CHATS = "chats"
RECENT_ERRORS = "errors:recent"
WEB_CHANNEL = "web:events"
API_CHANNEL = "api:events"
BACKGROUND_TASKS = "background_tasks"


def session(key: SessionKey | str) -> str:
    return f"{SESSION_PREFIX}{key}"


def chat_sessions(chat_scope: str) -> str:
    """`chat_scope` is `platform:chat_id` (SessionKey.chat_scope)."""
    return f"chat_sessions:{chat_scope}"


def approved_shapes(key: SessionKey | str) -> str:
    return f"approved_shapes:{key}"


def standing_grants(chat_scope: str) -> str:
    """`chat_scope` is `platform:chat_id` (SessionKey.chat_scope)."""
    return f"standing_grants:{chat_scope}"


def grant_epoch(grants: str) -> str:
    """`grants` is the hash of a place's grants (approved_shapes or standing_grants)."""
    return f"grant_epoch:{grants}"


def context(chat_address: str) -> str:
    return f"context:{chat_address}"


def seen(platform: str, event_id: str) -> str:
    return f"seen:{platform}:{event_id}"


def refused(chat_address: str, user_id: str) -> str:
    return f"refused:{chat_address}:{user_id}"


def rate(user_address: str, minute: int) -> str:
    return f"rate:{user_address}:{minute}"


def rate_limited(user_address: str, minute: int) -> str:
    return f"ratelimited:{user_address}:{minute}"


def chat_memory(platform: str, chat_id: str) -> str:
    return f"memory:chat:{platform}:{chat_id}"


def user_memory(platform: str, user_id: str) -> str:
    return f"memory:user:{platform}:{user_id}"


def todo(key: SessionKey | str) -> str:
    return f"todo:{key}"


PENDING_PREFIX = "pending:"
SESSIONS_READY = "sessions:ready"
SESSIONS_STARTED = "sessions:started"
PENDING_TOTAL = "pending:total"
REPLICAS = "replicas"
SESSION_PREFIX = "session:"
SESSION_LEASE_PREFIX = "lease:session:"
REPLY_PREFIX = "reply:"
JOINED_PREFIX = "joined:"
FENCE_PREFIX = "fence:session:"
DEAD_LETTERS = "deadletters"
DISCORD_RECEIVED = "discord:received"  # gateway messages received, not yet through intake
MATTERMOST_RECEIVED = "mattermost:received"  # websocket posts received, not yet through intake
TELEGRAM_RECEIVED = "telegram:received"  # webhook updates answered 200, not yet through intake
MATTERMOST_SOCKET = "mattermost:socket"  # the WebSocket's connection id and next sequence


def pending(key: SessionKey | str) -> str:
    return f"{PENDING_PREFIX}{key}"


def reply(turn_id: str) -> str:
    return f"{REPLY_PREFIX}{turn_id}"


def joined(turn_id: str) -> str:
    """Set when a running turn took this stored message in: an edit no longer replaces it."""
    return f"{JOINED_PREFIX}{turn_id}"


def fence(key: SessionKey | str) -> str:
    """The session's fencing token: bumped at every take of its lease."""
    return f"{FENCE_PREFIX}{key}"


def claimed(lease_owner: str) -> str:
    """The sessions one claim took (its owner names one claim): the same claim sent again,
    its first answer lost with a failed-over master, gets them back."""
    return f"claimed:{lease_owner}"


def noticed(lease_owner: str) -> str:
    return f"noticed:{lease_owner}"


def wipe_offer(token: str) -> str:
    return f"wipe_offer:{token}"


def approval(request_id: str) -> str:
    return f"approval:{request_id}"


def alive(instance_id: str) -> str:
    return f"alive:{instance_id}"


def rendezvous_answer(namespace: str, item_id: str) -> str:
    return f"{namespace}:answer:{item_id}"


def rendezvous_channel(namespace: str) -> str:
    return f"{namespace}:answers"


def clarify_open(key: SessionKey | str) -> str:
    return f"clarify:open:{key}"


def clarify_question(question_id: str) -> str:
    return f"clarify:question:{question_id}"


def cron_runs(job_id: str) -> str:
    return f"cron:runs:{job_id}"


def cron_fired(job_id: str, slot: str, what: str = "run") -> str:
    suffix = "" if what == "run" else f":{what}"
    return f"cron:fired:{job_id}:{slot}{suffix}"


def cron_running(job_id: str, slot: str) -> str:
    return f"cron:running:{job_id}:{slot}"


def platform_thread(platform: str, chat_id: str, thread_id: str) -> str:
    return f"{platform}:thread:{chat_id}:{thread_id}"


def platform_conversation(platform: str, conversation_id: str) -> str:
    return f"{platform}:conversation:{conversation_id}"


def platform_file_offer(platform: str, offer_id: str) -> str:
    return f"{platform}:file_offer:{offer_id}"


def platform_prompt(platform: str, message_id: str) -> str:
    return f"{platform}:prompt:{message_id}"


def platform_cursor(platform: str, account: str) -> str:
    return f"{platform}:cursor:{account}"


def model_choice(key: SessionKey | str) -> str:
    return f"model_choice:{key}"


def usage(period: str, dimension: str, ident: str, unit: str) -> str:
    return f"usage:{period}:{dimension}:{ident}:{unit}"


def usage_index(period: str) -> str:
    return f"usage_index:{period}"


def budget_notice(period: str, dimension: str, ident: str, level: str) -> str:
    return f"budget_notice:{period}:{dimension}:{ident}:{level}"


SKILLS_INDEX = "skills:index"
SKILLS_VERSION = "skills:version"


def skill(name: str) -> str:
    return f"skill:{name}"


def retention_run(period: str) -> str:
    return f"retention:run:{period}"


# -- the search index on Redis (gateway/store/search_redis.py) ------------------------------

SEARCH_CHATS = "search:chats"
SEARCH_SESSIONS = "search:sessions"


def search_doc(doc_id: str) -> str:
    return f"search:doc:{doc_id}"


def search_chat(chat_scope: str) -> str:
    return f"search:chat:{chat_scope}"


def search_session(key: SessionKey | str) -> str:
    return f"search:session:{key}"


def search_term(chat_scope: str, term: str) -> str:
    return f"search:term:{chat_scope}:{term}"


def search_all_term(term: str) -> str:
    return f"search:allterm:{term}"


# -- lease names ---------------------------------------------------------------------------


def session_lease(key: SessionKey | str) -> str:
    return f"{SESSION_LEASE_PREFIX}{key}"


def leader(name: str) -> str:
    return f"leader:{name}"


# -- the web console, web chat and API (gateway/web/, adapters/web/, adapters/api/) ---------


def web_session(digest: str) -> str:
    return f"web:session:{digest}"


def web_signin(area: str, client: str, minute: int) -> str:
    """`area` is the sign-in's root (`/admin`, `/chat`): each area counts on its own."""
    return f"web:signin:{area}:{client}:{minute}"


def web_link(digest: str) -> str:
    return f"web:link:{digest}"


def web_messages(chat_address: str) -> str:
    return f"web:messages:{chat_address}"


def web_conversations(user_id: str) -> str:
    return f"web:conversations:{user_id}"


def web_file(file_id: str) -> str:
    return f"web:file:{file_id}"


def api_open(session: SessionKey | str) -> str:
    return f"api:open:{session}"


def api_live(request_id: str) -> str:
    return f"api:live:{request_id}"


def relayed(approval_id: str) -> str:
    return f"relayed:{approval_id}"


HOME_CHANNELS = "homes"
PAIRING_CODES = "pairing:codes"
PAIRING_GRANTS = "pairing:grants"


def pairing_user(address: str) -> str:
    return f"pairing:user:{address}"


def pairing_decided(code: str) -> str:
    return f"pairing:decided:{code}"


def pairing_denied(address: str) -> str:
    return f"pairing:denied:{address}"
