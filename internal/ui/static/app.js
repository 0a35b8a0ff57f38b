// workq dashboard: live overview counts and two small SVG charts, polled
// from the dashboard's JSON endpoints; "select all" on item lists. No
// library, no network beyond this server.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var root = main ? main.getAttribute('data-root') : './';

  // Item lists: a checkbox that selects every item of the page.
  var all = document.getElementById('select-all');
  if (all) {
    all.addEventListener('change', function () {
      var boxes = document.querySelectorAll('#items tbody input[type=checkbox][name=id]');
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
    });
  }

  var table = document.getElementById('queues');
  if (!table) return;
  var note = document.getElementById('sample-note');
  var interval = parseFloat(note && note.getAttribute('data-interval')) || 10;
  var every = Math.max(1, Math.min(interval, 5)) * 1000;
  var select = document.getElementById('chart-queue');
  var NS = 'http://www.w3.org/2000/svg';

  function fmtNum(n) { return Number(n).toLocaleString('en-US'); }
  function fmtAge(s) {
    if (!s || s <= 0) return '–';
    if (s < 60) return Math.floor(s) + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + ('0' + Math.floor(s % 60)).slice(-2) + 's';
    if (s < 172800) return Math.floor(s / 3600) + 'h' + ('0' + Math.floor((s % 3600) / 60)).slice(-2) + 'm';
    return Math.floor(s / 86400) + 'd';
  }
  function fmtTime(iso) { return iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace('Z', 'Z') : '–'; }

  function getJSON(path, done) {
    var x = new XMLHttpRequest();
    x.open('GET', root + path);
    x.setRequestHeader('Accept', 'application/json');
    x.onload = function () {
      if (x.status === 401) { window.location.href = root + 'login'; return; }
      if (x.status === 200) { try { done(JSON.parse(x.responseText)); } catch (e) { /* keep the last view */ } }
    };
    x.send();
  }

  function setText(cell, text) {
    if (!cell) return;
    var a = cell.querySelector('a');
    (a || cell).textContent = text;
  }

  function updateTable(d) {
    var seen = {};
    (d.queues || []).forEach(function (q) {
      var key = q.table + '/' + q.queue;
      seen[key] = true;
      var tr = table.querySelector('tr[data-key="' + CSS.escape(key) + '"]');
      if (!tr) {
        tr = document.createElement('tr');
        tr.setAttribute('data-key', key);
        var cols = ['table', 'queue', 'ready', 'scheduled', 'in_progress', 'oldest_ready_seconds', 'failed',
          'done_window', 'failed_window', 'retried_window', 'limit', 'state'];
        cols.forEach(function (c) {
          var cell = document.createElement(c === 'queue' ? 'th' : 'td');
          if (c === 'queue') { cell.setAttribute('scope', 'row'); }
          cell.setAttribute('data-f', c);
          if (c !== 'table' && c !== 'queue' && c !== 'state') cell.className = 'n';
          tr.appendChild(cell);
        });
        tr.querySelector('[data-f=table]').textContent = q.table;
        var a = document.createElement('a');
        a.href = root + 'items/' + encodeURIComponent(q.table) + '?queue=' + encodeURIComponent(q.queue);
        a.textContent = q.queue;
        tr.querySelector('[data-f=queue]').appendChild(a);
        var empty = table.querySelector('tbody td[colspan]');
        if (empty) empty.parentNode.remove();
        table.tBodies[0].appendChild(tr);
      }
      setText(tr.querySelector('[data-f=ready]'), fmtNum(q.ready));
      setText(tr.querySelector('[data-f=scheduled]'), fmtNum(q.scheduled));
      setText(tr.querySelector('[data-f=in_progress]'), fmtNum(q.in_progress));
      setText(tr.querySelector('[data-f=oldest_ready_seconds]'), fmtAge(q.oldest_ready_seconds));
      setText(tr.querySelector('[data-f=failed]'), fmtNum(q.failed));
      setText(tr.querySelector('[data-f=done_window]'), fmtNum(q.done_window));
      setText(tr.querySelector('[data-f=failed_window]'), fmtNum(q.failed_window));
      setText(tr.querySelector('[data-f=retried_window]'), fmtNum(q.retried_window));
      setText(tr.querySelector('[data-f=limit]'), q.shard_limits ? q.shard_limits : q.limit === null ? '–' : String(q.limit));
      var st = tr.querySelector('[data-f=state]');
      if (st) {
        st.textContent = '';
        if (q.paused) {
          var s = document.createElement('strong'); s.className = 'paused'; s.textContent = 'paused'; st.appendChild(s);
          if (q.paused_shards) st.appendChild(document.createTextNode(' on ' + q.paused_shards.join(', ')));
        }
        else st.textContent = 'running';
      }
    });
    var sampled = note && note.querySelector('[data-f=sampled]');
    if (sampled && d.sampled_at) { sampled.textContent = fmtTime(d.sampled_at); sampled.setAttribute('datetime', d.sampled_at); }
    var since = note && note.querySelector('[data-f=since]');
    if (since && d.since) since.textContent = fmtTime(d.since);
    table.setAttribute('data-updated', String(Date.now()));
  }

  // Charts: one SVG line chart per figure, series told apart by colour
  // and by dash pattern, with a text summary for screen readers.
  var styles = {
    done: ['#1a6b30', ''], retry: ['#8a4b00', '6 3'], failed: ['#a3161c', '2 2'], expired: ['#5a2d91', '8 3 2 3'],
    other: ['#4a5360', '1 3'], ready: ['#0b4f91', ''], in_progress: ['#8a4b00', '6 3']
  };
  var labels = { done: 'done', retry: 'retried', failed: 'failed', expired: 'expired', other: 'other', ready: 'ready', in_progress: 'in progress' };

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function draw(box, times, series, unit) {
    var W = 640, H = 220, L = 56, R = 12, T = 10, B = 28;
    box.textContent = '';
    var svg = el('svg', { viewBox: '0 0 ' + W + ' ' + H, 'aria-hidden': 'true', focusable: 'false' }, box);
    var max = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) max = v; }); });
    max = niceMax(max);
    var t0 = times.length ? times[0] : 0, t1 = times.length ? times[times.length - 1] : 1;
    if (t1 - t0 < 60000) t0 = t1 - 60000;
    function x(t) { return L + (W - L - R) * (t - t0) / (t1 - t0); }
    function y(v) { return T + (H - T - B) * (1 - v / max); }
    for (var i = 0; i <= 4; i++) {
      var v = max * i / 4, yy = y(v);
      el('line', { x1: L, x2: W - R, y1: yy, y2: yy, stroke: '#d5dbe1', 'stroke-width': 1 }, svg);
      var lab = el('text', { x: L - 6, y: yy + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#4a5360' }, svg);
      lab.textContent = (v >= 100 || v === 0 ? Math.round(v) : v.toFixed(v < 1 ? 2 : 1));
    }
    var span = Math.round((t1 - t0) / 60000);
    var l0 = el('text', { x: L, y: H - 8, 'font-size': 11, fill: '#4a5360' }, svg);
    l0.textContent = span + ' min ago';
    var l1 = el('text', { x: W - R, y: H - 8, 'font-size': 11, fill: '#4a5360', 'text-anchor': 'end' }, svg);
    l1.textContent = 'now';
    series.forEach(function (s) {
      if (!times.length) return;
      var pts = times.map(function (t, i) { return x(t).toFixed(1) + ',' + y(s.values[i]).toFixed(1); }).join(' ');
      var st = styles[s.name];
      el('polyline', { points: pts, fill: 'none', stroke: st[0], 'stroke-width': 2, 'stroke-dasharray': st[1], 'stroke-linejoin': 'round' }, svg);
    });
    var legend = document.createElement('ul');
    legend.className = 'legend';
    series.forEach(function (s) {
      var li = document.createElement('li');
      var sw = el('svg', { width: 28, height: 10, 'aria-hidden': 'true' }, li);
      el('line', { x1: 0, x2: 28, y1: 5, y2: 5, stroke: styles[s.name][0], 'stroke-width': 3, 'stroke-dasharray': styles[s.name][1] }, sw);
      li.appendChild(document.createTextNode(' ' + labels[s.name]));
      legend.appendChild(li);
    });
    box.appendChild(legend);
  }

  function summary(series, unit) {
    return series.map(function (s) {
      var v = s.values.length ? s.values[s.values.length - 1] : 0;
      return labels[s.name] + ' ' + (unit === 'per second' ? v.toFixed(2) + '/s' : fmtNum(v));
    }).join(', ');
  }

  function updateCharts() {
    var sel = select ? select.value : '';
    getJSON('api/history' + (sel ? '?' + sel : ''), function (h) {
      var rates = (h.outcomes || []).map(function (o) { return { name: o, values: h.rates[o] || [] }; });
      var depth = [{ name: 'ready', values: h.ready || [] }, { name: 'in_progress', values: h.in_progress || [] }];
      var rc = document.getElementById('chart-rates'), dc = document.getElementById('chart-depth');
      if (rc) draw(rc, h.times || [], rates, 'per second');
      if (dc) draw(dc, h.times || [], depth, 'items');
      var rs = document.getElementById('rate-sum'), ds = document.getElementById('depth-sum');
      if (rs) rs.textContent = 'Latest: ' + summary(rates, 'per second') + '.';
      if (ds) ds.textContent = 'Latest: ' + summary(depth, 'items') + '.';
    });
  }

  function tick() {
    getJSON('api/overview', updateTable);
    updateCharts();
  }
  if (select) select.addEventListener('change', updateCharts);
  updateCharts();
  setInterval(tick, every);
})();
