// The web console (CONTRACT §19): plain ES2022 and the DOM, no framework, no build step.
// Every action is a call of the public API with the signed-in user's token in the
// X-Auth-Token header; the token lives in sessionStorage only (never in a URL, never logged).

const SESSION_KEY = 'console.session';
const CONTENT = '/content-service';
const SEARCH = '/search-service';
const FILES = '/file-service';
const DELIVERY = '/file-delivery-service';

/** @type {{token: string, userId: string} | null} */
let session = readSession();
/** Things to stop when the page changes (timers, sockets, object URLs). */
let cleanups = [];

function readSession() {
  try {
    return JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null');
  } catch {
    return null;
  }
}

// ---- DOM helpers ----

/** Creates an element: attributes (`class`, `text`, `on<event>`, others as attributes; never `style`) and children. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

const main = () => document.getElementById('main');

function show(...nodes) {
  const m = main();
  m.replaceChildren(...nodes);
}

/** A status line read out by screen readers; `kind` is info, ok or error. */
function statusLine(id) {
  const el = h('p', { id, class: 'status', role: 'status', 'aria-live': 'polite' });
  el.say = (text, kind = 'info') => {
    el.textContent = text;
    el.className = `status ${kind}`;
  };
  return el;
}

const pretty = (v) => JSON.stringify(v, null, 2);
/** A time of the API (ISO text or epoch milliseconds) as ISO text. */
const when = (t) => (typeof t === 'number' ? new Date(t).toISOString() : (t ?? ''));
const enc = (s) => encodeURIComponent(s);
const encPath = (p) => p.split('/').map(enc).join('/');
/**
 * A file path (a key of svcFiles, written by whoever may update the content) as the path of a
 * delivery URL, or null when it would name another address: URL parsing resolves `.` and `..`
 * segments (and their `%2e` spellings), so `../../content-service/webhooks` would make the
 * viewer's browser send its token to another path of the site.
 */
const deliveryPath = (p) => (p.split('/').some((seg) => seg === '' || seg === '.' || seg === '..') ? null : encPath(p));

// ---- API ----

class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** One call of the public API with the session's token; JSON in and out unless `raw`. */
async function api(method, path, { body, headers = {}, raw, accept = 'application/json' } = {}) {
  const h2 = { Accept: accept, ...headers };
  if (session) h2['X-Auth-Token'] = session.token;
  let payload;
  if (raw !== undefined) payload = raw;
  else if (body !== undefined) {
    payload = JSON.stringify(body);
    h2['Content-Type'] = 'application/json';
  }
  const res = await fetch(path, { method, headers: h2, body: payload, cache: 'no-store' });
  if (res.status === 401 && session && path !== `${CONTENT}/security/token`) {
    signedOut('Your session has ended; sign in again.');
    throw new ApiError(401, { message: 'Not signed in' });
  }
  const type = res.headers.get('content-type') ?? '';
  const json = type.includes('json') ? await res.json().catch(() => null) : null;
  if (!res.ok) throw new ApiError(res.status, json);
  return { status: res.status, json, headers: res.headers, res, text: () => res.text() };
}

/** How an error is told to the user: the status and the platform's message, a 409 plainly. */
function describeError(e) {
  if (e instanceof ApiError) {
    if (e.status === 409)
      return `Conflict (409): this content was changed by someone else after you loaded it, so your change was not made. Reload the page to see the current version, then try again. (${e.message})`;
    if (e.status === 403) return `Not allowed (403): ${e.message}`;
    if (e.status === 404) return `Not found (404): ${e.message}`;
    return `Error ${e.status}: ${e.message}`;
  }
  return `Error: ${e?.message ?? e}`;
}

// ---- session ----

function signedOut(message) {
  session = null;
  sessionStorage.removeItem(SESSION_KEY);
  location.hash = '#/signin';
  render(message);
}

/** Signing out revokes every token this tab held (the current one and those it renewed). */
async function signOut() {
  await renewing;
  // Signed out at once: a page shown while the tokens are revoked starts no renewal.
  const s = session;
  session = null;
  sessionStorage.removeItem(SESSION_KEY);
  const held = s ? [s.token, ...(s.held ?? [])] : [];
  await Promise.all(
    held.map((token) => fetch(`${CONTENT}/security/token`, { method: 'DELETE', headers: { 'X-Auth-Token': token }, cache: 'no-store' }).catch(() => undefined)),
  );
  signedOut('Signed out.');
}

function signInPage(message) {
  const status = statusLine('signin-status');
  const user = h('input', { id: 'username', name: 'username', autocomplete: 'username', required: true });
  const pass = h('input', { id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const form = h(
    'form',
    {
      class: 'card narrow',
      onsubmit: async (ev) => {
        ev.preventDefault();
        status.say('Signing in…');
        try {
          const r = await api('POST', `${CONTENT}/security/token`, { body: { username: user.value, password: pass.value } });
          session = { token: r.json.token, userId: r.json.userId, renewTime: r.json.renewTime };
          sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
          location.hash = '#/search';
          render();
        } catch (e) {
          status.say(e.status === 401 ? 'Wrong user name or password.' : describeError(e), 'error');
        }
      },
    },
    h('h1', { text: 'Sign in' }),
    h('label', { for: 'username', text: 'User name' }),
    user,
    h('label', { for: 'password', text: 'Password' }),
    pass,
    h('button', { type: 'submit', id: 'signin', text: 'Sign in' }),
    status,
  );
  show(form);
  if (message) status.say(message);
  user.focus();
}

// ---- search ----

function searchPage(params) {
  const q = params.get('q') ?? '';
  const input = h('input', { id: 'q', type: 'search', name: 'q', value: q, placeholder: 'Words, or a Solr query such as svc_type_s:article' });
  const results = h('div', { id: 'results' });
  const status = statusLine('search-status');
  const form = h(
    'form',
    {
      role: 'search',
      class: 'row',
      onsubmit: (ev) => {
        ev.preventDefault();
        location.hash = `#/search?${new URLSearchParams({ q: input.value })}`;
      },
    },
    h('label', { for: 'q', class: 'sr-only', text: 'Search' }),
    input,
    h('button', { type: 'submit', id: 'search', text: 'Search' }),
  );
  show(h('h1', { text: 'Search' }), form, status, results);
  if (!params.has('q')) return;
  status.say('Searching…');
  const query = new URLSearchParams({
    q: q.trim() || '*:*',
    rows: '50',
    fl: 'id,svc_type_s,svc_modificationTime_dt,svc_text',
    sort: 'svc_modificationTime_dt desc',
    wt: 'json',
  });
  api('GET', `${SEARCH}/content/select?${query}`)
    .then((r) => {
      const docs = r.json.response.docs;
      status.say(`${r.json.response.numFound} found${docs.length < r.json.response.numFound ? `, the newest ${docs.length} shown` : ''}.`);
      results.replaceChildren(
        h(
          'ul',
          { class: 'results' },
          docs.map((d) => {
            const key = String(d.id).split(':')[1];
            const title = (Array.isArray(d.svc_text) ? d.svc_text[0] : d.svc_text)?.split('\n')[0] || '(no text)';
            return h(
              'li',
              {},
              h('a', { href: `#/content/contentid/${enc(key)}`, class: 'result', text: title }),
              h('span', { class: 'meta', text: ` ${d.svc_type_s ?? ''} · ${d.svc_modificationTime_dt ?? ''} · contentid/${key}` }),
            );
          }),
        ),
      );
    })
    .catch((e) => status.say(describeError(e), 'error'));
}

// ---- content ----

function section(title, ...children) {
  return h('section', { class: 'card', 'aria-label': title }, h('h2', { text: title }), ...children);
}

async function contentPage(ns, alias) {
  const base = `${CONTENT}/content/alias/${enc(ns)}/${enc(alias)}`;
  const status = statusLine('content-status');
  show(h('h1', { text: `${ns}/${alias}` }), status);
  status.say('Loading…');
  let content;
  let meta;
  let history;
  try {
    [content, meta, history] = await Promise.all([api('GET', base), api('GET', `${base}/metadata`), api('GET', `${base}/history`)]);
  } catch (e) {
    status.say(describeError(e), 'error');
    return;
  }
  const etag = content.headers.get('etag');
  const env = content.json;
  const aspects = env.aspects ?? {};
  const key = env.system.id.split('/')[1];
  status.say(`Version ${env.system.version}, ${env.system.contentType}, modified ${env.system.modificationTime}.`);

  // Aliases, views, time state.
  const aliases = meta.json.aspects.svcAliases?.aliases ?? {};
  const aliasList = Object.entries(aliases)
    .filter(([k]) => k !== '_type')
    .flatMap(([nsName, list]) => list.map((a) => `${nsName}/${a}`));
  const views = Object.entries(meta.json.aspects.svcViewInfo?.views ?? {}).filter(([k]) => k !== '_type');
  const timeState = aspects.svcTimeState?.views ?? {};
  const summary = section(
    'Summary',
    h(
      'dl',
      { class: 'facts' },
      h('dt', { text: 'Type' }),
      h('dd', { text: env.system.contentType }),
      h('dt', { text: 'Version' }),
      h('dd', { id: 'version', text: env.system.version }),
      h('dt', { text: 'Aliases' }),
      h('dd', { id: 'aliases', text: aliasList.join(', ') || '—' }),
      h('dt', { text: 'Views' }),
      h('dd', {
        id: 'views',
        text: views.map(([v, e]) => `${v} (${e.history.at(-1)?.version === env.system.version ? 'this version' : 'another version'})`).join(', ') || '—',
      }),
      h('dt', { text: 'Time state' }),
      h(
        'dd',
        { id: 'timestate' },
        Object.entries(timeState)
          .filter(([k]) => k !== '_type')
          .map(([v, w]) => `${v}: ${w.onTime ?? 'any time'} → ${w.offTime ?? 'no end'}`)
          .join('; ') || 'always visible on its views',
      ),
      h('dt', { text: 'Hidden' }),
      h('dd', { text: meta.json.aspects.svcContentState?.hidden ? 'yes' : 'no' }),
    ),
  );

  // Aspects, editable.
  const own = Object.fromEntries(Object.entries(aspects).filter(([k]) => k !== '_type'));
  const editor = h('textarea', { id: 'aspects-editor', rows: 14, spellcheck: 'false', value: pretty(own) });
  const wsName = h('input', { id: 'draft-ws', value: 'desk', autocomplete: 'off' });
  const editStatus = statusLine('edit-status');
  const parsed = () => {
    try {
      return JSON.parse(editor.value);
    } catch (e) {
      editStatus.say(`The aspects are not JSON: ${e.message}`, 'error');
      return null;
    }
  };
  const aspectsCard = section(
    'Aspects',
    h('label', { for: 'aspects-editor', text: 'Aspects (JSON)' }),
    editor,
    h(
      'div',
      { class: 'row' },
      h('button', {
        id: 'save',
        text: 'Save',
        onclick: async () => {
          const a = parsed();
          if (!a) return;
          try {
            await api('PUT', base, { body: { aspects: a }, headers: { 'If-Match': etag } });
            editStatus.say('Saved.', 'ok');
            render();
          } catch (e) {
            editStatus.say(describeError(e), 'error');
          }
        },
      }),
      h('label', { for: 'draft-ws', text: 'Workspace' }),
      wsName,
      h('button', {
        id: 'save-draft',
        text: 'Save as draft',
        onclick: async () => {
          const a = parsed();
          if (!a) return;
          try {
            await api('PUT', `${CONTENT}/content/workspace/${enc(wsName.value)}/alias/contentid/${enc(key)}`, {
              body: { system: { contentType: env.system.contentType }, aspects: a },
            });
            editStatus.say(`Draft saved in workspace ${wsName.value}.`, 'ok');
          } catch (e) {
            editStatus.say(describeError(e), 'error');
          }
        },
      }),
    ),
    editStatus,
  );

  // Files and image renditions.
  const files = Object.entries(aspects.svcFiles?.files ?? {}).filter(([k]) => k !== '_type');
  const fileList = h('ul', { id: 'files', class: 'files' });
  for (const [path] of files) {
    const li = h('li', {}, h('span', { text: path }));
    fileList.append(li);
    const file = deliveryPath(path);
    if (file === null) continue;
    const url = `${DELIVERY}/version/${enc(env.system.version)}/${file}?w=240`;
    api('GET', url, { accept: 'image/*,*/*' })
      .then(async (r) => {
        if (!(r.headers.get('content-type') ?? '').startsWith('image/')) return;
        const src = URL.createObjectURL(await r.res.blob());
        cleanups.push(() => URL.revokeObjectURL(src));
        li.append(h('img', { src, alt: `${path}, rendition 240 pixels wide`, class: 'rendition' }));
      })
      .catch((e) => li.append(h('span', { class: 'error', text: ` ${describeError(e)}` })));
  }
  const fileInput = h('input', { id: 'file', type: 'file' });
  const fileStatus = statusLine('file-status');
  const filesCard = section(
    'Files',
    files.length ? fileList : h('p', { text: 'No files.' }),
    h('label', { for: 'file', text: 'Add a file' }),
    fileInput,
    h('button', {
      id: 'upload',
      text: 'Upload',
      onclick: async () => {
        const f = fileInput.files?.[0];
        if (!f) return fileStatus.say('Choose a file first.', 'error');
        const name = f.name.replace(/[^A-Za-z0-9._-]+/g, '_');
        try {
          fileStatus.say('Uploading…');
          const up = await api('POST', `${FILES}/file/content/${enc(key)}/${enc(name)}`, {
            raw: f,
            headers: { 'Content-Type': f.type || 'application/octet-stream' },
          });
          const mapped = { ...(aspects.svcFiles?.files ?? {}), [name]: { fileUri: up.json.URI, filePath: name } };
          await api('PUT', base, { body: { aspects: { svcFiles: { files: mapped } } }, headers: { 'If-Match': etag } });
          fileStatus.say(`${name} uploaded.`, 'ok');
          render();
        } catch (e) {
          fileStatus.say(describeError(e), 'error');
        }
      },
    }),
    fileStatus,
  );

  show(h('h1', { text: `${ns}/${alias}` }), status, summary, aspectsCard, filesCard, historyCard(base, history.json.versions, etag));
}

/** History with a side-by-side compare of two versions, and restore (CONTRACT §15). */
function historyCard(base, versions, etag) {
  const option = (v) =>
    h('option', {
      value: v.version,
      text: `rev ${v.revision.revisionNumber} · ${v.creatorId ?? ''} · ${when(v.creationTime)}${v.restoredFrom ? ' (restored)' : ''}`,
    });
  const byVersion = new Map(versions.map((v) => [v.version, v]));
  const from = h('select', { id: 'from' }, versions.map(option));
  const to = h('select', { id: 'to' }, versions.map(option));
  if (versions.length > 1) from.value = versions.at(-2).version;
  to.value = versions.at(-1).version;
  const left = h('pre', { id: 'left', class: 'json', tabindex: '0', role: 'region', 'aria-label': 'From version aspects' });
  const right = h('pre', { id: 'right', class: 'json', tabindex: '0', role: 'region', 'aria-label': 'To version aspects' });
  const ops = h('ul', { id: 'patch', class: 'patch' });
  const status = statusLine('history-status');
  const aspectsAt = async (v) => (await api('GET', `${base}/${byVersion.get(v).revision.revisionNumber}`)).json.aspects;
  const compare = async () => {
    try {
      status.say('Comparing…');
      const [a, b, diff] = await Promise.all([
        aspectsAt(from.value),
        aspectsAt(to.value),
        api('GET', `${base}/compare?${new URLSearchParams({ from: from.value, to: to.value })}`),
      ]);
      left.textContent = pretty(a);
      right.textContent = pretty(b);
      ops.replaceChildren(
        ...diff.json.patch.map((o) => h('li', { class: `op ${o.op}`, text: `${o.op} ${o.path}${'value' in o ? ` = ${JSON.stringify(o.value)}` : ''}` })),
      );
      status.say(
        diff.json.patch.length ? `${diff.json.patch.length} change(s) from the left version to the right one.` : 'The two versions have the same aspects.',
        'ok',
      );
    } catch (e) {
      status.say(describeError(e), 'error');
    }
  };
  const restore = async () => {
    try {
      await api('POST', `${base}/restore?${new URLSearchParams({ version: from.value })}`, { headers: { 'If-Match': etag } });
      status.say(`Restored: a new version now has the aspects of ${from.value}.`, 'ok');
      render('Restored.');
    } catch (e) {
      status.say(describeError(e), 'error');
    }
  };
  return section(
    'History',
    h(
      'ol',
      { id: 'history', class: 'history' },
      versions.map((v) =>
        h('li', {
          text: `${v.version} · rev ${v.revision.revisionNumber} · ${v.creatorId ?? ''} · ${when(v.creationTime)} · ${(v.views ?? []).join(', ')}${v.restoredFrom ? ` · restored from ${v.restoredFrom}` : ''}`,
        }),
      ),
    ),
    h('div', { class: 'row' }, h('label', { for: 'from', text: 'Left (from)' }), from, h('label', { for: 'to', text: 'Right (to)' }), to),
    h(
      'div',
      { class: 'row' },
      h('button', { id: 'compare', text: 'Compare', onclick: compare }),
      h('button', { id: 'restore', text: 'Restore the left version', onclick: restore }),
    ),
    status,
    h('div', { class: 'sidebyside' }, left, right),
    h('h3', { text: 'Changes (RFC 6902)' }),
    ops,
  );
}

// ---- live change feed ----

function feedPage() {
  const list = h('ol', { id: 'feed', class: 'feed', reversed: true });
  const status = statusLine('feed-status');
  show(h('h1', { text: 'Live changes' }), status, list);
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}${CONTENT}/changes/ws`);
  let closedByUs = false;
  cleanups.push(() => {
    closedByUs = true;
    ws.close();
  });
  // The token goes in the first message, never in the address.
  ws.addEventListener('open', () => {
    ws.send(JSON.stringify({ token: session.token, since: 'now' }));
    status.say('Connected: changes appear here as they are committed.', 'ok');
  });
  ws.addEventListener('message', (m) => {
    const e = JSON.parse(m.data);
    if (e.error) return status.say(`The feed closed: ${e.error.message}`, 'error');
    const key = String(e.id).split('/')[1];
    list.prepend(
      h(
        'li',
        { class: `event ${e.kind}` },
        h('time', { datetime: e.time, text: e.time }),
        ` ${e.kind}${e.view ? ` ${e.view}` : ''} `,
        h('a', { href: `#/content/contentid/${enc(key)}`, text: e.id }),
        ` ${e.contentType} by ${e.committer ?? '?'}`,
      ),
    );
    while (list.children.length > 200) list.lastChild.remove();
  });
  ws.addEventListener('close', () => {
    if (!closedByUs) status.say('The feed connection closed. Reload to reconnect.', 'error');
  });
}

// ---- workspaces ----

async function workspacesPage(ws) {
  const input = h('input', { id: 'ws', value: ws ?? 'desk' });
  const status = statusLine('ws-status');
  const list = h('div', { id: 'drafts' });
  show(
    h('h1', { text: 'Workspaces' }),
    h(
      'form',
      {
        class: 'row',
        onsubmit: (ev) => {
          ev.preventDefault();
          location.hash = `#/workspaces/${enc(input.value)}`;
        },
      },
      h('label', { for: 'ws', text: 'Workspace' }),
      input,
      h('button', { type: 'submit', id: 'open-ws', text: 'Open' }),
    ),
    status,
    list,
  );
  if (!ws) return;
  try {
    const info = await api('GET', `${CONTENT}/content/workspace/${enc(ws)}`);
    const drafts = Object.keys(info.json.drafts ?? {});
    status.say(drafts.length ? `${drafts.length} draft(s) in ${ws}.` : `No drafts in ${ws}.`);
    for (const id of drafts) {
      const [ns, alias] = id.split('/');
      const url = `${CONTENT}/content/workspace/${enc(ws)}/alias/${enc(ns)}/${enc(alias)}`;
      const d = await api('GET', url);
      const msg = statusLine(`draft-status-${alias}`);
      list.append(
        section(
          id,
          h('pre', { class: 'json', tabindex: '0', text: pretty(d.json.aspects) }),
          h(
            'div',
            { class: 'row' },
            h('a', { href: `#/content/${enc(ns)}/${enc(alias)}`, text: 'Open the main version' }),
            h('button', {
              class: 'promote',
              text: 'Promote',
              onclick: async () => {
                try {
                  await api('POST', `${url}/promote`);
                  msg.say('Promoted: the draft is now the main version.', 'ok');
                } catch (e) {
                  msg.say(describeError(e), 'error');
                }
              },
            }),
            h('button', {
              text: 'Discard',
              onclick: async () => {
                try {
                  await api('DELETE', url);
                  msg.say('Draft discarded.', 'ok');
                } catch (e) {
                  msg.say(describeError(e), 'error');
                }
              },
            }),
          ),
          msg,
        ),
      );
    }
  } catch (e) {
    status.say(describeError(e), 'error');
  }
}

// ---- operations ----

/** Samples of /metrics kept across visits of the page: the last five minutes. */
const samples = [];
const SAMPLE_MS = 2000;
const KEEP = 150;

/** Sums of the Prometheus text format's samples by metric name. */
function parseMetrics(text) {
  const sums = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) sums[m[1]] = (sums[m[1]] ?? 0) + v;
  }
  return sums;
}

const CHARTS = [
  { name: 'Requests per second', of: (s, prev) => (prev ? Math.max(0, (s.m.http_requests_total - prev.m.http_requests_total) / ((s.t - prev.t) / 1000)) : 0) },
  { name: 'Actor requests in flight', of: (s) => s.m.gateway_actor_requests_in_flight ?? 0 },
  { name: 'Oldest pending webhook delivery (s)', of: (s) => s.m.webhook_oldest_pending_seconds ?? 0 },
  { name: 'Resident memory (MB)', of: (s) => (s.m.process_resident_memory_bytes ?? 0) / 1e6 },
];

function sparkline(name, values) {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 240;
  const H = 48;
  const max = Math.max(1e-9, ...values);
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', String(W));
  svg.setAttribute('height', String(H));
  svg.setAttribute('role', 'img');
  const last = values.at(-1) ?? 0;
  svg.setAttribute(
    'aria-label',
    `${name}: now ${last.toFixed(1)}, at most ${max.toFixed(1)} over the last ${Math.round((values.length * SAMPLE_MS) / 1000)} seconds`,
  );
  const line = document.createElementNS(NS, 'polyline');
  const step = values.length > 1 ? W / (KEEP - 1) : 0;
  line.setAttribute('points', values.map((v, i) => `${(i * step).toFixed(1)},${(H - 2 - (v / max) * (H - 4)).toFixed(1)}`).join(' '));
  line.setAttribute('class', 'spark');
  svg.append(line);
  return h('figure', { class: 'chart' }, svg, h('figcaption', { text: `${name}: ${last.toFixed(1)}` }));
}

function operationsPage() {
  const status = statusLine('ops-status');
  const charts = h('div', { id: 'charts', class: 'charts' });
  const sessions = h('div', { id: 'sessions' });
  const parts = h('div', { id: 'partitions' });
  const hooks = h('div', { id: 'webhooks' });
  const reindexStatus = statusLine('reindex-status');
  show(
    h('h1', { text: 'Operations' }),
    status,
    section('Figures from /metrics (last minutes)', charts),
    section(
      'Re-indexing sessions',
      h('button', {
        id: 'reindex-full',
        text: 'Re-index everything',
        onclick: async () => {
          try {
            const r = await api('POST', `${CONTENT}/index/reindex/full`);
            reindexStatus.say(await r.text(), 'ok');
          } catch (e) {
            reindexStatus.say(describeError(e), 'error');
          }
        },
      }),
      reindexStatus,
      sessions,
    ),
    section('Partitions, owners and backlogs', parts),
    section('Webhook deliveries', hooks),
  );
  let stopped = false;
  cleanups.push(() => {
    stopped = true;
  });
  const tick = async () => {
    if (stopped) return;
    try {
      const [ops, metrics] = await Promise.all([api('GET', `${CONTENT}/operations`), fetch('/metrics', { cache: 'no-store' }).then((r) => r.text())]);
      samples.push({ t: Date.now(), m: parseMetrics(metrics) });
      while (samples.length > KEEP) samples.shift();
      charts.replaceChildren(
        ...CHARTS.map((c) =>
          sparkline(
            c.name,
            samples.map((s, i) => c.of(s, samples[i - 1])),
          ),
        ),
      );
      renderSessions(sessions, ops.json.reindexSessions);
      renderPartitions(parts, ops.json);
      await renderWebhooks(hooks, ops.json.webhooks);
      status.say(`Updated ${new Date().toLocaleTimeString()}.`);
    } catch (e) {
      status.say(describeError(e), 'error');
    }
    if (!stopped) setTimeout(tick, SAMPLE_MS);
  };
  tick();
}

function renderSessions(el, sessions) {
  if (!sessions.length) return el.replaceChildren(h('p', { text: 'No re-indexing sessions.' }));
  el.replaceChildren(
    h(
      'ul',
      { class: 'sessions' },
      sessions.map((s) => {
        const pct = s.total ? Math.floor((s.done / s.total) * 100) : 100;
        const label = `Session ${s.session}: ${s.done} of ${s.total} (${pct}%)${s.completed ? ', complete' : ''}`;
        return h(
          'li',
          { class: 'session', 'data-session': s.session },
          h('label', { for: `p-${s.session}`, text: label }),
          h('progress', { id: `p-${s.session}`, max: String(Math.max(1, s.total)), value: String(s.total ? s.done : 1) }),
        );
      }),
    ),
  );
}

function renderPartitions(el, ops) {
  const members = h('p', { text: `Actor processes: ${ops.members.map((m) => m.id).join(', ') || 'none'}` });
  const head = h(
    'tr',
    {},
    ['Partition', 'Owner', 'Mailbox lag', 'Mailbox pending', 'Indexer lag', 'Indexer pending', 'Dead letters', 'Indexer dead letters'].map((t) =>
      h('th', { scope: 'col', text: t }),
    ),
  );
  const rows = ops.partitions.map((p) =>
    h(
      'tr',
      {},
      h('th', { scope: 'row', text: String(p.partition) }),
      [p.owner ?? 'none', p.mailbox.lag ?? '?', p.mailbox.pending, p.indexer.lag ?? '?', p.indexer.pending, p.deadLetters, p.indexerDeadLetters].map((v) =>
        h('td', { text: String(v) }),
      ),
    ),
  );
  el.replaceChildren(members, h('table', {}, h('caption', { class: 'sr-only', text: 'Partitions' }), h('thead', {}, head), h('tbody', {}, rows)));
}

async function renderWebhooks(el, summary) {
  const hooks = (await api('GET', `${CONTENT}/webhooks`)).json.webhooks;
  const out = [
    h('p', {
      text: `Waiting: ${summary.pending}. Attempts so far: ${
        Object.entries(summary.outcomes)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }.`,
    }),
  ];
  for (const w of hooks.slice(0, 10)) {
    const d = (await api('GET', `${CONTENT}/webhooks/${enc(w.id)}/deliveries?limit=5`)).json.deliveries;
    out.push(
      h('h3', { text: `${w.url} (${w.id})` }),
      d.length
        ? h(
            'ul',
            {},
            d.map((x) =>
              h('li', {
                text: `${x.time} · ${x.status} · ${x.attempts} attempt(s)${x.lastStatus ? ` · last ${x.lastStatus}` : ''}${x.lastError ? ` · ${x.lastError}` : ''}`,
              }),
            ),
          )
        : h('p', { text: 'No deliveries.' }),
    );
  }
  el.replaceChildren(...out);
}

// ---- routing ----

/**
 * Past its renew time (half way to expiry, CONTRACT §4: milliseconds since the epoch, as digits)
 * the token is exchanged for a new one, `{username, token}`, so a console left open keeps
 * working. The old one stays valid until it expires (a live feed or another tab may still use
 * it), and is kept in `held` so that signing out revokes it too. One renewal at a time.
 */
let renewing = null;
function renewIfDue() {
  const due = Number(session?.renewTime);
  if (renewing || !Number.isFinite(due) || due > Date.now()) return renewing;
  const old = session;
  renewing = (async () => {
    try {
      const r = await api('POST', `${CONTENT}/security/token`, { body: { username: old.userId, token: old.token } });
      // Signed out meanwhile: the new token is not kept, it is revoked.
      if (session !== old) {
        await fetch(`${CONTENT}/security/token`, { method: 'DELETE', headers: { 'X-Auth-Token': r.json.token }, cache: 'no-store' }).catch(() => undefined);
        return;
      }
      // Tokens expire after a day: those renewed more than a day ago need no revoking.
      const held = [old.token, ...(old.held ?? [])].slice(0, 8);
      session = { token: r.json.token, userId: r.json.userId, renewTime: r.json.renewTime, held };
      sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
    } catch {
      // an expired token is met by the next call's 401
    } finally {
      renewing = null;
    }
  })();
  return renewing;
}

function render(message) {
  renewIfDue();
  for (const c of cleanups) c();
  cleanups = [];
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  if (!session) {
    nav.hidden = true;
    who.replaceChildren();
    return signInPage(message);
  }
  nav.hidden = false;
  who.replaceChildren(`Signed in as ${session.userId} `, h('button', { id: 'signout', text: 'Sign out', onclick: signOut }));
  const hash = location.hash.slice(1) || '/search';
  const [path, query = ''] = hash.split('?');
  const segs = path.split('/').filter(Boolean).map(decodeURIComponent);
  for (const a of nav.querySelectorAll('a')) {
    if (a.getAttribute('href') === `#/${segs[0] ?? 'search'}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (segs[0] === 'content' && segs.length === 3) return contentPage(segs[1], segs[2]);
  if (segs[0] === 'feed') return feedPage();
  if (segs[0] === 'workspaces') return workspacesPage(segs[1]);
  if (segs[0] === 'operations') return operationsPage();
  return searchPage(new URLSearchParams(query));
}

window.addEventListener('hashchange', () => render());
render();
