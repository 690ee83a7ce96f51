// jtrace flame graph viewer: the report's tables above the graph, when
// the page is `jtrace report --html` (the data carries jtrace.report.v1).
//
// Each method and thread row has a bar: its wall time split into CPU and
// off-CPU by cause, in the graph's colours, as wide as its wall time is
// against the widest row.

const REPORT = D.report || null;
const reportRows = [];

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// A bar of `wall` ns: CPU, then each cause of `off` (name → ns).
function bar(wall, cpu, off, widest) {
  const b = el('div', undefined, 'bar');
  b.style.width = Math.max(1, (300 * wall) / Math.max(widest, 1)) + 'px';
  const segs = [['cpu', cpu]].concat(Object.entries(off || {}));
  for (const [cause, ns] of segs) {
    if (!ns || !wall) continue;
    const s = el('i');
    s.style.width = (100 * ns) / wall + '%';
    s.style.background = CAUSE_COLOR[cause] || '#888';
    s.title = `${cause}: ${fmtNs(ns)}`;
    b.append(s);
  }
  return b;
}

function table(title, head, rows) {
  const sec = el('section');
  sec.append(el('h3', title));
  const t = el('table');
  const tr = el('tr');
  for (const h of head) tr.append(el('th', h));
  t.append(tr);
  for (const r of rows) t.append(r);
  sec.append(t);
  return sec;
}

function offTotal(off) {
  return Object.values(off || {}).reduce((a, b) => a + b, 0);
}
function topCauses(off) {
  return Object.entries(off || {})
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([c, ns]) => `${c} ${fmtNs(ns)}`)
    .join(', ');
}

if (REPORT) {
  const box = $('report');
  box.hidden = false;
  const tr = REPORT.trace;
  box.append(el('h2', 'jtrace report'));
  box.append(el('div', `command: ${tr.command}`));
  box.append(el('div', `pid ${tr.pid} · duration ${fmtNs(tr.duration_ns)} · lost events: kernel ${tr.lost_events.kernel}, jvm ${tr.lost_events.jvm}` + (tr.complete ? '' : ' · INCOMPLETE')));
  for (const p of tr.problems || []) box.append(el('div', 'problem: ' + p, 'problem'));
  const cause = D.report_cause;
  const key = (m) => (cause ? (m.off_cpu_ns || {})[cause] || 0 : offTotal(m.off_cpu_ns));
  const methods = REPORT.methods.filter((m) => key(m) > 0 || !cause).sort((a, b) => key(b) - key(a)).slice(0, D.report_top);
  const widest = Math.max(...methods.map((m) => m.wall_ns), 1);
  const rows = methods.map((m) => {
    const r = el('tr');
    const name = `${m.class}.${m.name}`;
    r.append(el('td', name, 'name'), el('td', String(m.calls), 'num'), el('td', fmtNs(m.wall_ns), 'num'), el('td', fmtNs(m.cpu_ns), 'num'), el('td', fmtNs(offTotal(m.off_cpu_ns)), 'num'));
    const b = el('td');
    b.append(bar(m.wall_ns, m.cpu_ns, m.off_cpu_ns, widest));
    r.append(b, el('td', topCauses(m.off_cpu_ns)));
    r.title = 'click: search this method in the graph';
    r.addEventListener('click', () => setSearch(m.class + '.' + m.name));
    reportRows.push({ kind: 'method', name, wall: m.wall_ns, cpu: m.cpu_ns, off: m.off_cpu_ns || {} });
    return r;
  });
  box.append(table(cause ? `Methods by ${cause} time` : 'Methods by time off CPU (inclusive of callees)', ['method', 'calls', 'wall', 'cpu', 'off', 'wall: cpu and off-CPU by cause', 'top causes'], rows));
  if (!methods.length) box.append(el('div', 'no traced method in this selection (select methods with jtrace run --methods)'));
  // Threads by CPU time: the busy ones first (idle JVM threads wait all run long).
  const threads = REPORT.threads.filter((t) => !t.tracer).sort((a, b) => b.cpu_ns - a.cpu_ns).slice(0, D.report_top);
  const tw = Math.max(...threads.map((t) => t.wall_ns), 1);
  const trows = threads.map((t) => {
    const r = el('tr');
    r.append(el('td', `${t.name} [${t.tid}]`, 'name'), el('td', fmtNs(t.wall_ns), 'num'), el('td', fmtNs(t.cpu_ns), 'num'), el('td', fmtNs(offTotal(t.off_cpu_ns)), 'num'));
    const b = el('td');
    b.append(bar(t.wall_ns, t.cpu_ns, t.off_cpu_ns, tw));
    r.append(b, el('td', topCauses(t.off_cpu_ns)));
    reportRows.push({ kind: 'thread', name: `${t.name} [${t.tid}]`, wall: t.wall_ns, cpu: t.cpu_ns, off: t.off_cpu_ns || {} });
    return r;
  });
  box.append(table('Threads by CPU time', ['thread', 'wall', 'cpu', 'off', 'wall: cpu and off-CPU by cause', 'top causes'], trows));
  box.append(el('h3', 'Where the time went, by stack (flame graph below)'));
}
