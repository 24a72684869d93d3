// The dashboard page: snapshots from /ws (dashboard.py) drawn into the tables and a canvas
// chart of the chosen symbol: its sampled last trades as a line over the bid-ask band, with the
// Spark bars of the same minutes as candles behind them. Times are market times, in UTC.

const BARS_IN_TABLE = 15;
const symbolSelect = document.getElementById("symbol");
const canvas = document.getElementById("chart");
let names = [];
let chosen = 0;
let socket = null;

const price = (x) => (x == null ? "–" : x.toFixed(2));
const count = (x) => Math.round(x).toLocaleString("en-US");
const hhmm = (ms, seconds) =>
  new Date(ms).toISOString().slice(11, seconds ? 19 : 16);

function connect() {
  socket = new WebSocket(`ws://${location.host}/ws`);
  socket.onopen = () => setConnection(true);
  socket.onclose = () => {
    setConnection(false);
    setTimeout(connect, 1000);
  };
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "hello") {
      hello(message.names);
    } else if (message.type === "snapshot" && message.symbol === chosen) {
      render(message);
    }
  };
}

function setConnection(up) {
  const span = document.getElementById("connection");
  span.textContent = up ? "live" : "disconnected";
  span.className = up ? "up" : "down";
}

function hello(symbolNames) {
  names = symbolNames;
  symbolSelect.replaceChildren(
    ...names.map((name, id) => new Option(name, String(id), false, id === chosen)),
  );
  choose(chosen);
}

function choose(symbol) {
  chosen = symbol;
  symbolSelect.value = String(symbol);
  document.getElementById("chart-title").textContent = names[symbol] ?? `#${symbol}`;
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ symbol }));
  }
}

symbolSelect.addEventListener("change", () => choose(Number(symbolSelect.value)));

function render(snapshot) {
  const stats = snapshot.stats;
  document.getElementById("ticks").textContent = count(stats.ticks);
  document.getElementById("rate").textContent = count(stats.rate);
  document.getElementById("bar-count").textContent = count(stats.bars);
  document.getElementById("market-time").textContent =
    stats.market_ms == null ? "–" : hhmm(stats.market_ms, true);
  const row = snapshot.book.find((r) => r[0] === snapshot.symbol);
  document.getElementById("last-price").textContent = row ? price(row[3]) : "";
  renderBars(snapshot.bars);
  renderBook(snapshot.book);
  drawChart(snapshot.series, snapshot.bars);
  // What the tables and the chart show now, for whoever looks (the tests)
  canvas.dataset.symbol = document.querySelector("#bars tbody").dataset.symbol =
    String(snapshot.symbol);
}

function cells(row, values) {
  while (row.cells.length > values.length) row.lastChild.remove();
  values.forEach(([text, style], i) => {
    const cell = row.cells[i] ?? row.appendChild(document.createElement("td"));
    cell.textContent = text;
    cell.className = style ?? "";
  });
  return row;
}

function renderBars(bars) {
  const rows = bars.slice(0, BARS_IN_TABLE).map((bar) => {
    const row = cells(document.createElement("tr"), [
      [hhmm(Date.parse(bar.minute))],
      [price(bar.open)],
      [price(bar.high)],
      [price(bar.low)],
      [price(bar.close), bar.close >= bar.open ? "up" : "down"],
      [count(bar.volume)],
      [bar.vwap.toFixed(4)],
      [count(bar.ticks)],
    ]);
    row.dataset.minute = bar.minute;
    return row;
  });
  document.querySelector("#bars tbody").replaceChildren(...rows);
}

// The book's rows and their cells are kept, one row per symbol, and only their text rewritten: a
// click whose press and release fell on two different elements (one replaced in between by the
// next snapshot) would be lost.
const bookRows = new Map();

function renderBook(book) {
  const body = document.querySelector("#book tbody");
  const rows = book.map(([symbol, bid, ask, last, vwap, volume, ticks]) => {
    let row = bookRows.get(symbol);
    if (row === undefined) {
      row = document.createElement("tr");
      row.dataset.symbol = String(symbol);
      row.addEventListener("click", () => choose(symbol));
      bookRows.set(symbol, row);
    }
    cells(row, [
      [names[symbol] ?? `#${symbol}`],
      [price(bid)],
      [price(ask)],
      [price(last), last >= vwap ? "up" : "down"],
      [vwap.toFixed(4)],
      [count(volume)],
      [count(ticks)],
    ]);
    row.className = symbol === chosen ? "chosen" : "";
    return row;
  });
  if (rows.length !== body.children.length || rows.some((row, i) => body.children[i] !== row)) {
    body.replaceChildren(...rows);
  }
}

function drawChart(series, bars) {
  // The canvas's backing store follows its CSS size (sharp on high-DPI screens).
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  canvas.dataset.points = String(series.length);
  if (series.length < 2) {
    canvas.dataset.candles = "0";
    g.fillStyle = "#778";
    g.fillText("waiting for ticks…", 20, 30);
    return;
  }
  const pad = { left: 60, right: 16, top: 12, bottom: 26 };
  const t0 = series[0][0];
  const t1 = series[series.length - 1][0];
  const candles = bars
    .map((b) => ({ ...b, start: Date.parse(b.minute) }))
    .filter((b) => b.start + 60000 > t0 && b.start < t1);
  let low = Math.min(...series.map((p) => p[2]), ...candles.map((b) => b.low));
  let high = Math.max(...series.map((p) => p[3]), ...candles.map((b) => b.high));
  const margin = (high - low) * 0.05 || 0.05;
  low -= margin;
  high += margin;
  const x = (t) => pad.left + ((t - t0) / Math.max(t1 - t0, 1)) * (width - pad.left - pad.right);
  const y = (p) => pad.top + ((high - p) / (high - low)) * (height - pad.top - pad.bottom);

  g.font = "11px system-ui, sans-serif";
  g.strokeStyle = "#eef0f4";
  g.fillStyle = "#667";
  g.textAlign = "right";
  for (let i = 0; i <= 5; i++) {
    const p = low + ((high - low) * i) / 5;
    g.beginPath();
    g.moveTo(pad.left, y(p));
    g.lineTo(width - pad.right, y(p));
    g.stroke();
    g.fillText(p.toFixed(2), pad.left - 6, y(p) + 4);
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + ((t1 - t0) * i) / 4;
    g.textAlign = i === 0 ? "left" : i === 4 ? "right" : "center";
    g.fillText(hhmm(t, true), x(t), height - 8);
  }

  // Candles: a minute wide, clipped to the chart's time range.
  for (const b of candles) {
    const left = Math.max(x(b.start), pad.left);
    const right = Math.min(x(b.start + 60000), width - pad.right);
    const middle = (left + right) / 2;
    g.fillStyle = b.close >= b.open ? "rgba(19,138,54,0.18)" : "rgba(192,57,43,0.18)";
    g.strokeStyle = b.close >= b.open ? "rgba(19,138,54,0.6)" : "rgba(192,57,43,0.6)";
    g.beginPath();
    g.moveTo(middle, y(b.high));
    g.lineTo(middle, y(b.low));
    g.stroke();
    const top = y(Math.max(b.open, b.close));
    g.fillRect(left + 2, top, Math.max(right - left - 4, 1), Math.max(y(Math.min(b.open, b.close)) - top, 1));
  }
  canvas.dataset.candles = String(candles.length);

  // The bid-ask band, then the last trades.
  g.fillStyle = "rgba(70,110,200,0.15)";
  g.beginPath();
  series.forEach((p, i) => (i ? g.lineTo(x(p[0]), y(p[3])) : g.moveTo(x(p[0]), y(p[3]))));
  for (let i = series.length - 1; i >= 0; i--) g.lineTo(x(series[i][0]), y(series[i][2]));
  g.closePath();
  g.fill();
  g.strokeStyle = "#2456c8";
  g.lineWidth = 1.5;
  g.beginPath();
  series.forEach((p, i) => (i ? g.lineTo(x(p[0]), y(p[1])) : g.moveTo(x(p[0]), y(p[1]))));
  g.stroke();
  g.lineWidth = 1;
  const last = series[series.length - 1];
  g.fillStyle = "#2456c8";
  g.beginPath();
  g.arc(x(last[0]), y(last[1]), 3, 0, 2 * Math.PI);
  g.fill();
}

connect();
