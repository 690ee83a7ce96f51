// jtrace timeline viewer: mouse, keyboard, search and "find next".

// ---- interaction -------------------------------------------------------
function zoomAt(factor, x) {
  const t = T(x);
  let span = (ve - vs) * factor;
  span = Math.max(50, Math.min(span, Math.max(D.duration, 1000) * 4));
  vs = t - (x - LABEL_W) / (W - LABEL_W) * span;
  ve = vs + span;
  redraw();
}
function pan(dxPx) { const dt = dxPx / k(); vs += dt; ve += dt; redraw(); }

let drag = null, lastMouse = null;
cv.addEventListener('wheel', (e) => {
  e.preventDefault();
  const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? H : 1;
  const dx = e.deltaX * unit, dy = e.deltaY * unit;
  if (e.shiftKey) { scrollY += dy || dx; clampScroll(); redraw(); }
  else if (Math.abs(dx) > Math.abs(dy)) pan(dx);
  else zoomAt(Math.exp(dy * 0.002), e.offsetX);
  hover = null; tip.hidden = true;
}, { passive: false });
cv.addEventListener('mousedown', (e) => { drag = { x: e.offsetX, y: e.offsetY, moved: false }; });
window.addEventListener('mouseup', (e) => {
  if (drag && !drag.moved && e.target === cv) {
    const it = hit(e.offsetX, e.offsetY);
    pinned = it && !same(it, pinned) ? it : null;
    if (pinned) { pin.innerHTML = details(pinned) + '<div style="color:#889;margin-top:4px">pinned · Esc to close</div>'; pin.hidden = false; } else pin.hidden = true;
    redraw();
  }
  drag = null; cv.classList.remove('drag');
});
cv.addEventListener('mousemove', (e) => {
  lastMouse = [e.offsetX, e.offsetY];
  if (drag) {
    const dx = e.offsetX - drag.x, dy = e.offsetY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 2) { drag.moved = true; cv.classList.add('drag'); }
    if (drag.moved) {
      pan(-dx); scrollY -= dy; clampScroll();
      drag.x = e.offsetX; drag.y = e.offsetY; tip.hidden = true; hover = null; return;
    }
  }
  const it = hit(e.offsetX, e.offsetY);
  if (!same(it, hover)) { hover = it; redraw(); }
  showTip(it, e.offsetX, e.offsetY);
});
cv.addEventListener('mouseleave', () => { hover = null; tip.hidden = true; redraw(); });
window.addEventListener('keydown', (e) => {
  if (e.target && e.target.tagName === 'INPUT') {
    if (e.key === 'Escape') e.target.blur();
    if (e.key === 'Enter' && e.target.id === 'search') {
      // Apply a search still waiting for its debounce, then move.
      if (searchTimer) { clearTimeout(searchTimer); searchTimer = 0; setSearch(e.target.value); }
      findNext(e.shiftKey ? -1 : 1);
      e.preventDefault();
    }
    return;
  }
  const cx = lastMouse ? lastMouse[0] : LABEL_W + (W - LABEL_W) / 2, w = W - LABEL_W;
  switch (e.key) {
    case 'w': case 'W': case '+': case '=': zoomAt(0.7, cx); break;
    case 's': case 'S': case '-': case '_': zoomAt(1 / 0.7, cx); break;
    case 'a': case 'A': case 'ArrowLeft': pan(-w * 0.15); break;
    case 'd': case 'D': case 'ArrowRight': pan(w * 0.15); break;
    case 'ArrowUp': scrollY -= 60; clampScroll(); redraw(); break;
    case 'ArrowDown': scrollY += 60; clampScroll(); redraw(); break;
    case 'PageUp': scrollY -= H * 0.8; clampScroll(); redraw(); break;
    case 'PageDown': scrollY += H * 0.8; clampScroll(); redraw(); break;
    case '0': case 'Home': [vs, ve] = FULL(); redraw(); break;
    case 'n': findNext(1); break;
    case 'N': case 'p': findNext(-1); break;
    case 'Escape': pinned = null; pin.hidden = true; redraw(); break;
    default: return;
  }
  e.preventDefault();
});
let searchTimer = 0;
$('search').addEventListener('input', (e) => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => { searchTimer = 0; setSearch(e.target.value); }, 120);
});
$('next').addEventListener('click', () => findNext(1));
$('prev').addEventListener('click', () => findNext(-1));
$('filter').addEventListener('input', (e) => { filterText = e.target.value.trim(); layout(); redraw(); });
window.addEventListener('resize', () => { resize(); redraw(); });
if (PATHS.length) {
  const sel = $('paths');
  sel.innerHTML = '<option value="-1">critical path: none</option>' +
    PATHS.map((p, i) => `<option value="${i}">critical path: ${esc(p.label)}</option>`).join('');
  sel.value = String(pathSel);
  sel.hidden = false;
  sel.addEventListener('change', () => selectPath(+sel.value));
}

function setSearch(q) {
  q = q.trim().toLowerCase();
  if (!q) { matched = null; } else {
    matched = new Uint8Array(D.methods.length);
    D.methods.forEach((m, i) => { if ((m[0] + '.' + m[1] + m[2]).toLowerCase().includes(q)) matched[i] = 1; });
  }
  searchCount = 0;
  hitT = hitTh = hitJ = null; hitPos = -1;
  if (matched) for (const th of D.threads) for (const m of th.spans.m) searchCount += matched[m];
  $('summary').textContent = summary();
  redraw();
}

// ---- find next/previous match ---------------------------------------------
// All matching spans in time order (built on the first move of a search).
function buildHits() {
  const idx = [], t = [];
  D.threads.forEach((th, ti) => {
    const m = th.spans.m;
    for (let j = 0; j < m.length; j++) if (matched[m[j]]) { idx.push(ti, j); t.push(th.ss[j]); }
  });
  const order = Uint32Array.from(t.keys()).sort((a, b) => t[a] - t[b] || idx[2 * a] - idx[2 * b]);
  hitT = new Float64Array(order.length); hitTh = new Uint32Array(order.length); hitJ = new Uint32Array(order.length);
  order.forEach((o, q) => { hitT[q] = t[o]; hitTh[q] = idx[2 * o]; hitJ[q] = idx[2 * o + 1]; });
}
// Moves to the next (dir 1) or previous (-1) match after the current one,
// or after the middle of the view; skips threads the filter hides; wraps.
function findNext(dir) {
  if (!matched) return null;
  if (!hitT) buildHits();
  const n = hitT.length;
  if (!n) return null;
  let p = hitPos;
  if (p < 0) {
    const mid = (vs + ve) / 2;
    let lo = 0, hi = n;
    while (lo < hi) { const m = (lo + hi) >> 1; if (hitT[m] >= mid) hi = m; else lo = m + 1; }
    p = dir > 0 ? lo - 1 : lo;
  }
  const shown = new Set(lanes.filter((l) => l.th).map((l) => l.th.tid));
  for (let step = 0; step < n; step++) {
    p = ((p + dir) % n + n) % n;
    const th = D.threads[hitTh[p]];
    if (!shown.has(th.tid)) continue;
    hitPos = p;
    goTo({ kind: 'span', th, j: hitJ[p] });
    return pinned;
  }
  return null;
}
// Brings a span into view (zooming so it is readable), scrolls to its
// lane, and pins its details.
function goTo(it) {
  const th = it.th, s = th.ss[it.j], e = th.se[it.j], d = Math.max(e - s, 1);
  let span = ve - vs;
  const px = d * (W - LABEL_W) / span;
  if (px < 4 || d > span * 0.8) span = Math.max(d * 3, 1000);
  vs = (s + e) / 2 - span / 2; ve = vs + span;
  const l = laneOf(th.tid);
  if (l) {
    const y = l.y + STATE_H + 1 + th.spans.z[it.j] * ROW;
    if (y < scrollY || y + ROW > scrollY + H - AXIS_H) { scrollY = l.y - 40; clampScroll(); }
  }
  pinned = it;
  pin.innerHTML = details(it) + '<div style="color:#889;margin-top:4px">match ' + (hitPos + 1) + '/' + searchCount + ' · n / Enter: next · N / Shift+Enter: previous · Esc to close</div>';
  pin.hidden = false;
  $('summary').textContent = summary();
  redraw();
}
