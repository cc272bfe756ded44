// ordergate console: the pages of ordergate-console, plain JavaScript, no framework, nothing
// loaded from elsewhere. Every figure and every action is one call of the JSON API (/api/...);
// the buttons a page shows follow what the database says the login may do (session.may), and
// the database refuses the rest whatever a page shows. Data is always set as text, never as
// markup.
'use strict';

const S = { who: null, csrf: '' };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const $ = (id) => document.getElementById(id);

function flash(msg) {
  $('flash').textContent = msg;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { $('flash').textContent = ''; }, 5000);
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') {
    opts.headers['Content-Type'] = 'application/json';
    opts.headers['X-CSRF-Token'] = S.csrf;
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: r.statusText }; }
  if (r.status === 401 && path !== '/api/login') { showLogin(); }
  if (!r.ok) { const err = new Error(data && data.error ? data.error : r.statusText); err.status = r.status; throw err; }
  return data;
}

function money(cents, cur) {
  if (cents === null || cents === undefined) return '';
  const exp = { JPY: 0, KRW: 0, KWD: 3, BHD: 3 }[cur] ?? 2;
  return (cents / 10 ** exp).toFixed(exp) + (cur ? ' ' + cur : '');
}
function when(iso) { return iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace(/(Z|\+00(:00)?)$/, ' UTC') : ''; }

// ---- session --------------------------------------------------------------------------------

function showLogin() {
  S.who = null;
  $('nav').hidden = true;
  $('logout').hidden = true;
  $('who').textContent = '';
  $('view').replaceChildren();
  $('login-form').hidden = false;
}

function setSession(s) {
  S.who = s;
  S.csrf = s.csrf;
  $('login-form').hidden = true;
  $('nav').hidden = false;
  $('logout').hidden = false;
  $('nav-settings').hidden = !s.may.settings;
  $('who').textContent = s.login;
}

$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('login-error').textContent = '';
  try {
    const s = await api('POST', '/api/login', { login: $('login-user').value, password: $('login-password').value });
    $('login-password').value = '';
    setSession(s);
    route();
  } catch (e) {
    $('login-password').value = '';
    $('login-error').textContent = e.message;
  }
});

$('logout').addEventListener('click', async () => {
  try { await api('POST', '/api/logout', {}); } catch (e) { /* the session is gone either way */ }
  showLogin();
});

// ---- overview ---------------------------------------------------------------------------------

function figure(label, value, id) {
  return el('div', { class: 'card' }, el('div', { class: 'muted', text: label }), el('div', { class: 'figure', id, text: String(value ?? '-') }));
}

// Cancels per minute over the last hour, stacked by source, as an SVG bar chart.
function cancelChart(rows, now) {
  const W = 720, H = 160, svgNS = 'http://www.w3.org/2000/svg';
  const end = Math.floor(Date.parse(now) / 60000);
  const mins = {};
  for (const r of rows) {
    const m = Math.floor(Date.parse(r.minute) / 60000);
    (mins[m] = mins[m] || { consumer: 0, scanner: 0, manual: 0 })[r.source] += r.n;
  }
  let max = 1;
  for (const v of Object.values(mins)) max = Math.max(max, v.consumer + v.scanner + v.manual);
  const svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('id', 'cancel-chart');
  svg.setAttribute('viewBox', `0 0 ${W} ${H + 14}`);
  svg.setAttribute('width', '100%');
  const bw = W / 60;
  for (let i = 0; i < 60; i++) {
    const m = end - 59 + i, v = mins[m];
    let y = H;
    for (const src of ['consumer', 'scanner', 'manual']) {
      if (!v || !v[src]) continue;
      const h = (v[src] / max) * (H - 10);
      const r = document.createElementNS(svgNS, 'rect');
      r.setAttribute('x', i * bw + 1); r.setAttribute('y', y - h);
      r.setAttribute('width', bw - 2); r.setAttribute('height', h);
      r.setAttribute('class', src);
      const t = document.createElementNS(svgNS, 'title');
      t.textContent = `${v[src]} ${src}`;
      r.append(t);
      svg.append(r);
      y -= h;
    }
  }
  for (const [x, label] of [[0, '-60 min'], [W / 2, '-30 min'], [W - 30, 'now']]) {
    const t = document.createElementNS(svgNS, 'text');
    t.setAttribute('x', x); t.setAttribute('y', H + 12); t.textContent = label;
    svg.append(t);
  }
  const top = document.createElementNS(svgNS, 'text');
  top.setAttribute('x', 0); top.setAttribute('y', 9); top.textContent = `${max}/min`;
  svg.append(top);
  return svg;
}

function ago(s) {
  if (s === null || s === undefined) return '';
  s = Math.max(0, Math.round(s));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : s < 172800 ? `${Math.round(s / 3600)} h ago` : `${Math.round(s / 86400)} days ago`;
}

// The last reconciliation: its result as the figure, then its age and what it found violated
// (an invariant by its number, a shop check by its name; -1 = the check failed).
function reconcileCard(r) {
  const found = r ? r.violated.map((x) => (/^\d+$/.test(x.name) ? `invariant ${x.name}` : x.name) + (x.n < 0 ? ' failed' : ` (${x.n})`)) : [];
  const detail = r ? `${ago(r.age_s)}` + (found.length ? `: ${found.join(', ')}` : '') + (r.detail ? `: ${r.detail}` : '') + (r.repaired ? `; ${r.repaired} repaired` : '') : 'ordergate-scanner --reconcile records each run';
  return el('div', { class: 'card' }, el('div', { class: 'muted', text: 'reconciliation: last run' }),
    el('div', { class: 'figure' + (r && r.result !== 'clean' ? ' bad' : ''), id: 'fig-reconcile', text: r ? r.result : 'never' }),
    el('div', { class: 'detail', id: 'fig-reconcile-detail', text: detail }));
}

async function viewOverview(v) {
  const o = await api('GET', '/api/overview');
  const total = (k) => o.cancels.filter((r) => r.source === k).reduce((a, r) => a + r.n, 0);
  const exc = el('table', { id: 'open-exceptions' }, el('tr', {}, el('th', { text: 'kind' }), el('th', { text: '< 1 h' }), el('th', { text: '< 1 day' }), el('th', { text: 'older' })));
  const kinds = {};
  for (const r of o.exceptions) (kinds[r.kind] = kinds[r.kind] || {})[r.age] = r.n;
  for (const [k, a] of Object.entries(kinds)) exc.append(el('tr', {}, el('td', { text: k }), el('td', { text: a.lt_1h || 0 }), el('td', { text: a.lt_1d || 0 }), el('td', { text: a.older || 0 })));
  if (!Object.keys(kinds).length) exc.append(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'no open exceptions' })));
  const sc = o.scanner;
  v.replaceChildren(
    el('h1', { text: 'Overview' }),
    el('div', { class: 'grid' },
      figure('pending orders' + (o.pending.estimated ? ' (about)' : ''), o.pending.total, 'fig-pending'),
      figure('overdue now', o.due.overdue, 'fig-overdue'),
      figure('due in 1 min', o.due.in_1m, 'fig-due-1m'),
      figure('due in 5 min', o.due.in_5m, 'fig-due-5m'),
      figure('due in 60 min', o.due.in_60m + (o.due.capped ? '+' : ''), 'fig-due-60m'),
      figure('lateness p50 / p99 (s)', o.lateness.n ? `${o.lateness.p50_s.toFixed(2)} / ${o.lateness.p99_s.toFixed(2)}` : '-', 'fig-lateness'),
      figure('outbox backlog', o.outbox.backlog + (o.outbox.oldest_age_s ? ` (oldest ${Math.round(o.outbox.oldest_age_s)} s)` : ''), 'fig-outbox'),
      figure('refunds requested / unconfirmed / reviews overdue', `${o.refunds.requested} / ${o.refunds.unconfirmed} / ${o.refunds.overdue_reviews}`, 'fig-refunds'),
      figure('scanner: last run', sc ? `${sc.status}, ${when(sc.started_at)}, ${sc.cancelled} cancelled` : 'never', 'fig-scanner'),
      reconcileCard(o.reconcile)),
    el('div', { class: 'card' },
      el('h2', { text: 'Cancels per minute, last hour' }),
      el('div', { class: 'legend' }, el('span', { class: 'consumer', text: `■ consumer ${total('consumer')}` }), el('span', { class: 'scanner', text: `■ scanner ${total('scanner')}` }), el('span', { class: 'manual', text: `■ manual ${total('manual')}` })),
      cancelChart(o.cancels, o.now)),
    el('div', { class: 'card' }, el('h2', { text: 'Open exceptions by kind and age' }), exc));
}

// ---- exceptions -------------------------------------------------------------------------------

const KINDS = ['late_payment', 'double_payment', 'amount_mismatch', 'unknown_order', 'refused_payment', 'currency_mismatch', 'overpaid', 'cancelled_part'];

async function viewExceptions(v, q) {
  const f = { state: q.get('state') || 'open', kind: q.get('kind') || '', min_age_s: q.get('min_age_s') || '', min_amount: q.get('min_amount') || '', channel: q.get('channel') || '' };
  const params = new URLSearchParams();
  for (const [k, val] of Object.entries(f)) if (val) params.set(k, val);
  if (q.get('before_at')) { params.set('before_at', q.get('before_at')); params.set('before_id', q.get('before_id')); }
  const page = await api('GET', '/api/exceptions?' + params);
  const sel = (name, opts, cur) => el('select', { id: 'f-' + name }, ...opts.map((o) => el('option', { value: o, selected: o === cur, text: o || '(any)' })));
  const input = (name, ph) => el('input', { id: 'f-' + name, placeholder: ph, value: f[name], size: 10 });
  const apply = () => {
    const p = new URLSearchParams();
    for (const k of ['state', 'kind', 'min_age_s', 'min_amount', 'channel']) { const val = $('f-' + k).value; if (val) p.set(k, val); }
    location.hash = '#/exceptions?' + p;
  };
  const table = el('table', { id: 'exceptions' }, el('tr', {},
    S.who.may.resolve ? el('th', {}, el('input', { type: 'checkbox', id: 'select-all', onchange: (e) => { for (const c of document.querySelectorAll('.exc-select')) c.checked = e.target.checked; } })) : null,
    ...['id', 'created', 'kind', 'order', 'amount', 'channel', 'resolution', 'state', 'note'].map((h) => el('th', { text: h }))));
  for (const x of page.items) {
    table.append(el('tr', { 'data-id': x.id },
      S.who.may.resolve ? el('td', {}, el('input', { type: 'checkbox', class: 'exc-select', value: x.id, disabled: x.state !== 'open' })) : null,
      el('td', {}, el('a', { href: `#/exception/${x.id}`, class: 'exc-link', text: x.id })),
      el('td', { text: when(x.created_at) }), el('td', { text: x.kind }),
      el('td', {}, el('a', { href: `#/order/${encodeURIComponent(x.order_no)}`, text: x.order_no })),
      el('td', { text: money(x.amount_cents, x.currency) }), el('td', { text: x.channel || '' }),
      el('td', { text: x.resolution }), el('td', { text: x.state }), el('td', {}, el('pre', { text: x.note || '' }))));
  }
  if (!page.items.length) table.append(el('tr', {}, el('td', { colspan: 10, class: 'muted', id: 'exceptions-empty', text: 'no exceptions match' })));
  const last = page.items[page.items.length - 1];
  const next = page.items.length === 50 && last ? (() => { const p = new URLSearchParams(params); p.set('before_at', last.created_at); p.set('before_id', last.id); return el('a', { href: '#/exceptions?' + p, id: 'next-page', text: 'older →' }); })() : null;
  const bulk = S.who.may.resolve ? el('div', { class: 'card', id: 'bulk' },
    el('label', {}, 'Note for the selected ', el('input', { id: 'bulk-note', size: 50, placeholder: 'what was done' })), ' ',
    el('button', { id: 'resolve-selected', onclick: async () => {
      const ids = [...document.querySelectorAll('.exc-select:checked')].map((c) => Number(c.value));
      if (!ids.length) { flash('select exceptions first'); return; }
      try {
        const r = await api('POST', '/api/exceptions/resolve', { ids, note: $('bulk-note').value });
        flash(r.items.map((i) => `${i.id}: ${i.outcome}`).join(', '));
        route();
      } catch (e) { flash(e.message); }
    } }, 'Resolve selected')) : null;
  v.replaceChildren(el('h1', { text: 'Exceptions' }),
    el('div', { class: 'filters' },
      el('label', {}, 'state ', sel('state', ['open', 'resolved', 'refunded', 'all'], f.state)),
      el('label', {}, 'kind ', sel('kind', [''].concat(KINDS), f.kind)),
      el('label', {}, 'older than (s) ', input('min_age_s', 'seconds')),
      el('label', {}, 'amount ≥ (minor units) ', input('min_amount', 'cents')),
      el('label', {}, 'channel ', input('channel', 'channel')),
      el('button', { id: 'f-apply', onclick: apply }, 'Filter')),
    bulk, table, next);
}

async function viewException(v, id) {
  const x = await api('GET', `/api/exceptions/${id}`);
  const may = S.who.may;
  const actions = el('div', { class: 'card', id: 'exception-actions' });
  if (may.resolve && x.state === 'open') {
    actions.append(el('label', {}, 'Note ', el('textarea', { id: 'resolve-note', placeholder: 'what was done (required)' })),
      el('button', { id: 'resolve-btn', onclick: async () => {
        try { const r = await api('POST', '/api/exceptions/resolve', { ids: [x.id], note: $('resolve-note').value }); flash(`exception ${x.id}: ${r.items[0].outcome}`); route(); } catch (e) { flash(e.message); }
      } }, 'Resolve'));
  }
  if (may.refund && x.refundable) {
    const decide = (decision) => async () => {
      try { const r = await api('POST', `/api/exceptions/${x.id}/refund`, { decision, note: $('resolve-note').value }); flash(`refund ${decision}: ${r.outcome}`); route(); } catch (e) { flash(e.message); }
    };
    actions.append(' ', el('button', { id: 'refund-approve', onclick: decide('approve') }, 'Approve refund'), ' ',
      el('button', { id: 'refund-decline', class: 'danger', onclick: decide('decline') }, 'Decline refund'));
  }
  const p = x.payment;
  v.replaceChildren(el('h1', { text: `Exception ${x.id}` }),
    el('table', { id: 'exception-detail' },
      ...[['kind', x.kind], ['state', x.state], ['resolution', x.resolution], ['amount', money(x.amount_cents, x.currency)], ['created', when(x.created_at)], ['resolved', x.resolved_at ? `${when(x.resolved_at)} by ${x.resolved_by}` : ''], ['payment', p ? `${p.txn_no}, ${money(p.amount_cents, p.currency)}, ${p.channel || 'no channel'}, ${p.outcome}` : 'none'], ['refunds', x.refunds.map((r) => `${r.refund_ref} ${r.outcome}`).join(', ') || 'none']]
        .map(([k, val]) => el('tr', {}, el('th', { text: k }), el('td', { text: val }))),
      el('tr', {}, el('th', { text: 'order' }), el('td', {}, el('a', { href: `#/order/${encodeURIComponent(x.order_no)}`, text: `${x.order_no} (${x.order && x.order.status ? x.order.status : 'unknown'})` }))),
      el('tr', {}, el('th', { text: 'note' }), el('td', {}, el('pre', { id: 'exception-note', text: x.note || '' })))),
    actions.childNodes.length ? actions : null);
}

// ---- orders ---------------------------------------------------------------------------------------

async function viewOrders(v, q) {
  const field = q.get('field') || 'order_no', term = q.get('q') || '';
  const form = el('form', { class: 'filters', id: 'order-search-form', onsubmit: (e) => { e.preventDefault(); location.hash = '#/orders?' + new URLSearchParams({ field: $('order-field').value, q: $('order-q').value }); } },
    el('select', { id: 'order-field' }, ...[['order_no', 'order number (prefix)'], ['txn_no', 'transaction number'], ['shop', 'shop field (name=value)']].map(([val, label]) => el('option', { value: val, selected: val === field, text: label }))),
    el('input', { id: 'order-q', value: term, size: 40, placeholder: 'search' }),
    el('button', { id: 'order-search', type: 'submit' }, 'Search'));
  v.replaceChildren(el('h1', { text: 'Orders' }), form);
  if (!term) return;
  const r = await api('GET', '/api/orders?' + new URLSearchParams({ field, q: term }));
  const table = el('table', { id: 'orders' }, el('tr', {}, ...['order', 'status', 'amount', 'expires', 'created', 'closed'].map((h) => el('th', { text: h }))));
  for (const o of r.items) table.append(el('tr', {}, el('td', {}, el('a', { href: `#/order/${encodeURIComponent(o.order_no)}`, class: 'order-link', text: o.order_no })), el('td', { text: o.status }), el('td', { text: money(o.amount_cents, o.currency) }), el('td', { text: when(o.expire_at) }), el('td', { text: when(o.created_at) }), el('td', { text: when(o.closed_at) })));
  if (!r.items.length) table.append(el('tr', {}, el('td', { colspan: 6, class: 'muted', text: 'no order matches' })));
  v.append(table);
}

function timeline(o) {
  const ev = [];
  if (o.created_at) ev.push([o.created_at, `placed: ${money(o.amount_cents, o.currency)}, due ${when(o.expire_at)}` + (o.items.length ? `, items ${o.items.map((i) => `${i.sku}×${i.qty}`).join(', ')}` : '') + (o.coupon_id ? `, coupon ${o.coupon_id}` : '')]);
  if (o.expire_at && o.original_expire_at && o.expire_at !== o.original_expire_at) ev.push([o.expire_at, `deadline held: ${when(o.expire_at)} (first ${when(o.original_expire_at)})`]);
  for (const m of o.amendments || []) ev.push([m.at, `amended by ${m.operator}: ${money(m.before && m.before.amount_cents, o.currency)} → ${money(m.after && m.after.amount_cents, o.currency)}`]);
  for (const d of o.deadline_changes || []) ev.push([d.at, `deadline moved by ${d.operator}: ${when(d.before)} → ${when(d.after)}`]);
  for (const r of o.reminders || []) if (r.state !== 'pending') ev.push([r.sent_at || r.due_at, `reminder ${r.offset_seconds} s before the deadline: ${r.state}` + (r.skip_reason ? ` (${r.skip_reason})` : '')]);
  for (const c of o.charges) ev.push([c.begun_at, `charge ${c.charge_ref} begun → ${c.state}` + (c.ended_at ? ` at ${when(c.ended_at)}` : '') + (c.txn_no ? ` (txn ${c.txn_no})` : '')]);
  for (const h of o.history) ev.push([h.at, `${h.from_status} → ${h.to_status} by ${h.source} (actor ${h.actor})` + (h.note ? `: ${h.note}` : '')]);
  for (const p of o.payments) ev.push([p.at, `payment ${p.txn_no}: ${money(p.amount_cents, p.currency)} via ${p.channel || '?'} → ${p.outcome}` + (p.operator ? ` (by ${p.operator})` : '')]);
  for (const x of o.exceptions) ev.push([x.created_at, `exception ${x.id} ${x.kind} (${x.resolution}) → ${x.state}` + (x.resolved_by ? ` by ${x.resolved_by}` : '')]);
  for (const r of o.refunds) ev.push([r.at, `refund ${r.refund_ref} ${r.outcome} (actor ${r.actor})`]);
  for (const b of o.events) ev.push([b.at, `event ${b.event_type}` + (b.published_at ? ` published ${when(b.published_at)}` : b.quarantined_at ? ' quarantined' : ' not yet published')]);
  ev.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return el('ol', { class: 'timeline', id: 'timeline' }, ...ev.map(([t, text]) => el('li', {}, el('span', { class: 'when', text: when(t) }), text)));
}

async function viewOrder(v, no) {
  const o = await api('GET', `/api/orders/${encodeURIComponent(no)}`);
  const parts = [el('h1', { text: `Order ${o.order_no}` }),
    el('p', {}, 'status ', el('strong', { id: 'order-status', text: o.status || 'not found' }), o.shop ? el('span', { class: 'muted', text: '  shop ' + JSON.stringify(o.shop) }) : null),
    el('div', { class: 'card' }, el('h2', { text: 'Timeline' }), timeline(o))];
  if (S.who.may.close && o.status === 'pending_payment' && o.close_effects) {
    const fx = o.close_effects;
    const confirm = el('div', { id: 'close-confirm', hidden: true },
      el('p', { id: 'close-effects', text: `Closing cancels ${o.order_no} now (source manual, actor ${S.who.login}). ` +
        (fx.stock_back.length ? `Stock back: ${fx.stock_back.map((i) => `${i.sku}×${i.qty}`).join(', ')}. ` : 'No stock lines. ') +
        (fx.coupon_back ? `Coupon ${fx.coupon_back} becomes available again. ` : 'No coupon. ') +
        'A payment that arrives later becomes a late-payment exception.' }),
      el('button', { id: 'close-confirm-yes', class: 'danger', onclick: async () => {
        try { const r = await api('POST', `/api/orders/${encodeURIComponent(o.order_no)}/close`, { reason: $('close-reason').value, confirm: true }); flash(`order ${o.order_no}: ${r.outcome}`); route(); } catch (e) { flash(e.message); }
      } }, 'Yes, close it'), ' ',
      el('button', { id: 'close-cancel', onclick: () => { confirm.hidden = true; } }, 'No'));
    parts.push(el('div', { class: 'card', id: 'close-box' }, el('h2', { text: 'Close by hand' }),
      el('label', {}, 'Reason (required) ', el('textarea', { id: 'close-reason' })),
      el('button', { id: 'close-btn', onclick: () => { if (!$('close-reason').value.trim()) { flash('give a reason'); return; } confirm.hidden = false; } }, 'Close order…'),
      confirm));
  }
  v.replaceChildren(...parts);
}

// ---- settings ---------------------------------------------------------------------------------

async function viewSettings(v) {
  const s = await api('GET', '/api/settings');
  const may = S.who.may.set_setting;
  const t = el('table', { id: 'settings' }, el('tr', {}, el('th', { text: 'setting' }), el('th', { text: 'value' })));
  for (const row of s.settings) {
    const cell = may ? el('td', {}, el('input', { value: row.value, id: 'set-' + row.key, size: 12 }), ' ',
      el('button', { onclick: async () => { try { const r = await api('POST', '/api/settings', { key: row.key, value: $('set-' + row.key).value }); flash(`${row.key}: was ${r.previous}`); } catch (e) { flash(e.message); } } }, 'Save'))
      : el('td', { text: row.value });
    t.append(el('tr', {}, el('td', { text: row.key }), cell));
  }
  const h = el('table', { id: 'hooks' }, el('tr', {}, ...['id', 'event', 'function', 'registered', 'by'].map((x) => el('th', { text: x }))));
  for (const k of s.hooks) h.append(el('tr', {}, el('td', { text: k.id }), el('td', { text: k.event }), el('td', { text: k.fn_name }), el('td', { text: when(k.created_at) }), el('td', { text: k.created_by })));
  if (!s.hooks.length) h.append(el('tr', {}, el('td', { colspan: 5, class: 'muted', text: 'no hooks registered' })));
  const audit = await api('GET', '/api/audit?limit=50');
  const a = el('table', { id: 'audit' }, el('tr', {}, ...['when', 'who', 'action', 'target', 'outcome', 'note or reason'].map((x) => el('th', { text: x }))));
  for (const r of audit.items) a.append(el('tr', {}, el('td', { text: when(r.at) }), el('td', { text: r.actor }), el('td', { text: r.action }), el('td', { text: r.target }), el('td', { text: r.outcome }), el('td', { text: r.detail ? (r.detail.note || r.detail.reason || JSON.stringify(r.detail)) : '' })));
  if (!audit.items.length) a.append(el('tr', {}, el('td', { colspan: 6, class: 'muted', text: 'no console action yet' })));
  v.replaceChildren(el('h1', { text: 'Settings' }), el('p', { class: 'muted', text: may ? 'You may change settings.' : 'Read-only: changing a setting needs ordergate_admin.' }), t, el('h2', { text: 'Hooks' }), h,
    el('h2', { text: 'Recent console actions' }), a);
}

// ---- routing ------------------------------------------------------------------------------------

async function route() {
  if (!S.who) return;
  const [path, query] = (location.hash.slice(1) || '/overview').split('?');
  const q = new URLSearchParams(query || '');
  const v = $('view');
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', path.startsWith(a.getAttribute('href').slice(1)));
  try {
    let m;
    if (path === '/overview') await viewOverview(v);
    else if (path === '/exceptions') await viewExceptions(v, q);
    else if ((m = path.match(/^\/exception\/(\d+)$/))) await viewException(v, m[1]);
    else if (path === '/orders') await viewOrders(v, q);
    else if ((m = path.match(/^\/order\/(.+)$/))) await viewOrder(v, decodeURIComponent(m[1]));
    else if (path === '/settings') await viewSettings(v);
    else v.replaceChildren(el('p', { text: 'no such page' }));
  } catch (e) {
    if (e.status !== 401) v.replaceChildren(el('p', { class: 'error', id: 'view-error', text: e.message }));
  }
}

window.addEventListener('hashchange', route);
(async () => {
  try { setSession(await api('GET', '/api/session')); route(); } catch (e) { showLogin(); }
})();
