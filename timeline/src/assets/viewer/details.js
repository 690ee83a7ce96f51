// jtrace timeline viewer: what is under the pointer, and its details.

// ---- hit testing and details ---------------------------------------------
function find(starts, ends, idx, n, t, tol) {
  let r = lbStart(starts, idx, n, t + tol, 0) - 1;
  let best = -1, bestD = Infinity;
  for (let q = r; q >= 0 && q >= r - 2; q--) {
    const j = idx ? idx[q] : q;
    const s = starts[j], e = ends[j];
    const dd = t < s ? s - t : t > e ? t - e : 0;
    if (dd <= tol && dd < bestD) { best = j; bestD = dd; }
  }
  return best;
}

// The window under x (the shortest, if they overlap), or -1.
function windowAt(mx) {
  const t = T(mx), tol = 2 / k();
  let best = -1;
  for (let i = firstWindow(t - tol); i < WIN.length && ws[i] <= t + tol; i++) {
    if (we[i] + tol < t) continue;
    if (best < 0 || we[i] - ws[i] < we[best] - ws[best]) best = i;
  }
  return best;
}
function hit(mx, my) {
  const it = hitItem(mx, my);
  if (it || mx < LABEL_W) return it;
  const w = windowAt(mx);
  return w >= 0 ? { kind: 'window', j: w } : null;
}
function hitItem(mx, my) {
  if (my < AXIS_H) return null;
  const y = my - AXIS_H + scrollY;
  const l = lanes.find((l) => y >= l.y && y < l.y + l.h);
  if (!l || !l.th) return null;
  const th = l.th, t = T(mx), tol = 2 / k();
  if (mx < LABEL_W) return { kind: 'thread', th };
  const ry = y - l.y;
  if (ry < STATE_H) {
    const g = find(th.gs, th.ge, null, th.nseg, t, tol);
    if (g >= 0) return { kind: 'off', th, j: th.gi[g], cause: th.gc[g] };
    if (th.ucov !== undefined && t >= th.ucov && t <= th.last) return { kind: 'uncov', th, s: th.ucov, e: th.last };
    if (t >= th.first && t <= th.last) {
      // Running: between the surrounding off-CPU intervals.
      const of = th.offs;
      const r = lbStart(of.s, null, of.s.length, t, 0);
      return { kind: 'run', th, s: r > 0 ? Math.max(th.first, of.e[r - 1]) : th.first, e: r < of.s.length ? Math.min(th.last, of.s[r]) : th.last };
    }
    return null;
  }
  const d = Math.floor((ry - STATE_H - 1) / ROW);
  if (d < 0 || d >= th.depth) return null;
  const r = th.rows[d];
  const j = find(th.ss, th.se, r, r.length, t, tol);
  return j >= 0 ? { kind: 'span', th, j } : null;
}

const same = (a, b) => a === b || (a && b && a.kind === b.kind && a.th === b.th && a.j === b.j && a.s === b.s);
const tname = (tid) => { const t = byTid.get(tid); return t ? `${t.name} [${tid}]` : `tid ${tid} (not traced)`; };
function causeRows(sparse) {
  let h = '';
  if (!sparse) return h;
  const rows = [];
  for (let q = 0; q < sparse.length; q += 2) rows.push([sparse[q], sparse[q + 1]]);
  rows.sort((a, b) => b[1] - a[1] || a[0] - b[0]); // ties in column order
  for (const [c, ns] of rows) h += `<div><i class="sw" style="background:${CC[c]}"></i>${esc(CAUSES[c])}</div><div>${fmtDur(ns)}</div>`;
  return h;
}
function enclosing(th, t) {
  // Innermost span open at t, for "in method" of an off-CPU interval.
  for (let d = th.depth - 1; d >= 0; d--) {
    const r = th.rows[d];
    const j = find(th.ss, th.se, r, r.length, t, 0);
    if (j >= 0 && th.ss[j] <= t && th.se[j] >= t) return j;
  }
  return -1;
}

// The longest off-CPU interval of th inside [s, e] (bounded work per hover).
function longestOff(th, s, e) {
  const of = th.offs, n = of.s.length;
  let best = -1;
  for (let j = lbStart(of.s, null, n, s, 0), q = 0; j < n && of.s[j] < e && q < 200000; j++, q++) {
    if (of.e[j] <= e && (best < 0 || of.e[j] - of.s[j] > of.e[best] - of.s[best])) best = j;
  }
  return best;
}
// The cause with the most time in interval j (ties: the first in column
// order; k is in time order).
function mainCause(of, j) {
  const k = of.k[j];
  let c = -1, v = -1;
  if (k) for (let q = 0; q < k.length; q += 2) if (k[q + 1] > v || (k[q + 1] === v && k[q] < c)) { v = k[q + 1]; c = k[q]; }
  return c;
}
function windowDetails(j) {
  const w = WIN[j];
  // Who was stopped: time of each thread off CPU for this cause inside it.
  let n = 0, tot = 0;
  for (const th of D.threads) {
    let any = false;
    for (let g = lbEnd(th.ge, null, th.nseg, w.s); g < th.nseg && th.gs[g] < w.e; g++) {
      if (th.gc[g] !== w.c) continue;
      tot += Math.min(th.ge[g], w.e) - Math.max(th.gs[g], w.s);
      any = true;
    }
    if (any) n++;
  }
  return `<b>${esc(w.kind)} #${w.n}</b> — JVM-wide stop of every Java thread of pid ${w.pid}` +
    `<div class="kv"><div>start</div><div>+${fmtDur(w.s)}</div><div>duration</div><div>${fmtDur(w.e - w.s)}${w.open ? ' (no end recorded)' : ''}</div>` +
    `<div>threads off CPU for ${esc(CAUSES[w.c])}</div><div>${n}</div><div>their ${esc(CAUSES[w.c])} time</div><div>${fmtDur(tot)}</div></div>`;
}

function longestBlock(th, s, e) {
  const b = longestOff(th, s, e);
  if (b < 0) return '';
  const of = th.offs, c = mainCause(of, b), ev = D.strings[of.x[b]];
  return `<div class="evi">longest off CPU: ${fmtDur(of.e[b] - of.s[b])}${c >= 0 ? ' ' + esc(CAUSES[c]) : ''}` +
    `${ev ? ' — ' + esc(ev) : ''}${of.w[b] >= 0 ? ', woken by ' + esc(tname(of.w[b])) : ''}</div>`;
}
// The JVM windows that took part of an off-CPU interval.
function stoppedBy(th, of, j) {
  const k = of.k[j];
  let h = '';
  if (k) for (let q = 0; q < k.length; q += 2) {
    if (k[q] === RQ || !WINC.has(k[q])) continue;
    const wi = windowOverlapping(k[q], th.pid, of.s[j], of.e[j]);
    if (wi >= 0) h += `<div class="evi">stopped by ${esc(WIN[wi].kind)} #${WIN[wi].n} (${fmtDur(we[wi] - ws[wi])}) for ${fmtDur(k[q + 1])}</div>`;
  }
  return h;
}
// What the waker was doing at the wakeup: its innermost traced method.
function wakerMethod(tid, t) {
  const wth = byTid.get(tid);
  if (!wth) return '';
  const e = enclosing(wth, t);
  return e >= 0 ? mname(wth.spans.m[e]) : 'no traced method';
}

function details(it) {
  if (it.kind === 'window') return windowDetails(it.j);
  const th = it.th;
  const who = `${esc(th.name)} [${th.tid}]`;
  if (it.kind === 'span') {
    const sp = th.spans, j = it.j, m = D.methods[sp.m[j]];
    const f = sp.f[j];
    let off = 0;
    if (sp.o[j]) for (let q = 1; q < sp.o[j].length; q += 2) off += sp.o[j][q];
    const uncov = sp.d[j] - sp.c[j] - off;
    const flags = [f & 1 ? 'threw an exception' : '', f & 2 ? 'no exit recorded' : '', f & 4 ? 'recursive (nested in itself)' : ''].filter(Boolean);
    return `<b>${esc(m[0])}.${esc(m[1])}</b> <span style="color:#667">${esc(m[2])}</span><br>thread ${who}, depth ${sp.z[j]}` +
      `<div class="kv"><div>start</div><div>+${fmtDur(sp.s[j])}</div><div>wall</div><div>${fmtDur(sp.d[j])}</div>` +
      `<div>CPU</div><div>${fmtDur(sp.c[j])}</div><div>off CPU</div><div>${fmtDur(off)}</div>${causeRows(sp.o[j])}` +
      (uncov > 0 ? `<div>not covered</div><div>${fmtDur(uncov)} (no kernel data)</div>` : '') +
      `<div>switches</div><div>${sp.v[j]} vol / ${sp.i[j]} invol</div></div>` + (flags.length ? `<div>${flags.join(', ')}</div>` : '') +
      longestBlock(th, th.ss[j], th.se[j]);
  }
  if (it.kind === 'off') {
    const of = th.offs, j = it.j;
    const how = of.p[j] === 1 ? 'preempted (involuntary switch)' : of.p[j] === 2 ? 'still off CPU at its last event' :
      of.p[j] === 3 ? 'no switch: its vCPU ran another guest' : 'blocked (voluntary switch)';
    const e = enclosing(th, of.s[j]);
    const ev = D.strings[of.x[j]];
    let h = `<b>off CPU: ${esc(CAUSES[it.cause])}</b> — ${how}<br>thread ${who}` +
      (e >= 0 ? `<br>in <b>${esc(mname(th.spans.m[e]))}</b>` : '<br>outside traced methods') +
      (ev ? `<div class="evi">${esc(ev)}</div>` : '') + stoppedBy(th, of, j) +
      `<div class="kv"><div>switch-out</div><div>+${fmtDur(of.s[j])}</div><div>off CPU</div><div>${fmtDur(of.e[j] - of.s[j])}</div>${causeRows(of.k[j])}`;
    if (of.w[j] >= 0) {
      const wm = wakerMethod(of.w[j], of.wt[j]);
      h += `<div>woken by</div><div>${esc(tname(of.w[j]))}</div>` + (wm ? `<div>waker was in</div><div>${esc(wm)}</div>` : '') +
        `<div>wakeup at</div><div>+${fmtDur(of.wt[j])}</div>`;
    }
    // The stack at the switch-out, innermost frame first (when recorded).
    const st = of.t ? D.strings[of.t[j]] : '';
    return h + '</div>' + (st ? `<div class="stack">${st.split('\n').map(esc).join('<br>')}</div>` : '');
  }
  if (it.kind === 'uncov') {
    return `<b>not covered</b><br>thread ${who}<div>no kernel data after +${fmtDur(it.s)} (the kernel stream ended early): ` +
      `whether the thread ran, and why not, is unknown</div><div class="kv"><div>for</div><div>${fmtDur(it.e - it.s)}</div></div>`;
  }
  if (it.kind === 'run') {
    return `<b>running</b><br>thread ${who}<div class="kv"><div>from</div><div>+${fmtDur(it.s)}</div><div>for</div><div>${fmtDur(it.e - it.s)}</div></div>`;
  }
  const offT = th.off.reduce((a, b) => a + b, 0);
  let rows = '';
  th.off.forEach((ns, c) => { if (ns) rows += `<div><i class="sw" style="background:${CC[c]}"></i>${esc(CAUSES[c])}</div><div>${fmtDur(ns)}</div>`; });
  const kind = (th.vid != null ? `virtual thread #${th.vid}${th.carrier != null ? ', mostly on carrier tid ' + th.carrier : ''}` : `${['application', 'JVM', 'native'][th.kind]} thread`) +
    (th.nstid != null ? (th.unmatched ? `, tid ${th.nstid} in its pid namespace, NOT PAIRED with a kernel thread (its time is not covered)` : `, tid ${th.nstid} in its pid namespace`) : '');
  return `<b>${who}</b> ${kind}${th.daemon ? ', daemon' : ''}${th.group ? ', group ' + esc(th.group) : ''}` +
    `<div class="kv"><div>wall</div><div>${fmtDur(th.wall)}</div><div>CPU</div><div>${fmtDur(th.cpu)}</div><div>off CPU</div><div>${fmtDur(offT)}</div>${rows}` +
    (th.wall > th.cpu + offT ? `<div>not covered</div><div>${fmtDur(th.wall - th.cpu - offT)}</div>` : '') +
    `<div>switches</div><div>${th.vol} vol / ${th.invol} invol</div><div>spans</div><div>${th.spans.s.length}</div></div>` +
    (th.anomalies ? `<div>⚠ ${th.anomalies} inconsistent events (lost events?)</div>` : '');
}

function showTip(it, mx, my) {
  if (!it) { tip.hidden = true; return; }
  tip.innerHTML = details(it);
  tip.hidden = false;
  const r = cv.getBoundingClientRect();
  let x = r.left + mx + 14, y = r.top + my + 14;
  const tw = tip.offsetWidth, tH = tip.offsetHeight;
  if (x + tw > window.innerWidth - 4) x = Math.max(4, r.left + mx - tw - 14);
  if (y + tH > window.innerHeight - 4) y = Math.max(4, r.top + my - tH - 14);
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
