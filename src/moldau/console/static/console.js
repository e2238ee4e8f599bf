// moldau console: confirmations, charts (uPlot), live tail (server-sent events). No inline scripts: the
// page's Content-Security-Policy allows only files served by the console.
(function () {
  "use strict";
  window.moldauCharts = {};

  // every form that changes something carries data-confirm
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  function fmtTime(sec) { return new Date(sec * 1000).toISOString().substring(11, 19); }

  var COLORS = ["#2458b3", "#d08a2c", "#2e8b57", "#b3261e", "#7b4fb3", "#4aa3c9", "#8c6d31", "#c2418c", "#555"];

  function makeChart(el) {
    var spec = JSON.parse(document.getElementById(el.getAttribute("data-chart")).textContent);
    var series = [{ value: function (u, v) { return v == null ? "-" : fmtTime(v); } }];
    // spec.scales (optional): the y scale of each series; the first scale's axis is on the left, a
    // second one (e.g. bytes/s next to records/s) on the right
    var names = spec.scales || spec.series.map(function () { return "y"; });
    var order = [];
    names.forEach(function (n) { if (order.indexOf(n) < 0) { order.push(n); } });
    spec.series.forEach(function (label, i) {
      series.push({ label: label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, scale: names[i] });
    });
    var scales = { x: { time: true } };
    var axes = [{}];
    order.forEach(function (n, i) {
      scales[n] = {};
      axes.push({ scale: n, size: 70, side: i === 0 ? 3 : 1, label: spec.scale_labels ? spec.scale_labels[i] : null,
                  grid: { show: i === 0 } });
    });
    var opts = { width: Math.max(el.clientWidth - 4, 300), height: 220, series: series, scales: scales, axes: axes };
    var u = new uPlot(opts, spec.data, el);
    var chart = { u: u, data: spec.data, updates: 0 };
    window.moldauCharts[el.id] = chart;
    if (spec.url && spec.refresh > 0) {
      setInterval(function () {
        fetch(spec.url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (d) {
          chart.data = d; chart.updates += 1; u.setData(d);
        }).catch(function () {});
      }, spec.refresh);
    }
    window.addEventListener("resize", function () { u.setSize({ width: Math.max(el.clientWidth - 4, 300), height: 220 }); });
  }

  function cell(text, pre) {
    var td = document.createElement("td");
    if (pre) { var p = document.createElement("pre"); p.textContent = text; td.appendChild(p); }
    else { td.textContent = text; }
    return td;
  }

  function setupTail(btn) {
    var source = null;
    var status = document.getElementById("tail-status");
    var table = document.getElementById("tail-table");
    var body = document.getElementById("tail-body");
    btn.addEventListener("click", function () {
      if (source) {
        source.close(); source = null; btn.textContent = "Start live tail"; status.textContent = "stopped";
        return;
      }
      table.hidden = false;
      status.textContent = "connecting";
      source = new EventSource(btn.getAttribute("data-tail-url"));
      btn.textContent = "Stop live tail";
      source.addEventListener("ready", function () { status.textContent = "live"; });
      source.addEventListener("records", function (e) {
        JSON.parse(e.data).forEach(function (r) {
          var tr = document.createElement("tr");
          tr.className = "tail-record";
          tr.setAttribute("data-partition", r.partition);
          tr.setAttribute("data-offset", r.offset);
          var hs = r.headers.map(function (h) { return h.key + "=" + (h.value == null ? "(null)" : h.value); });
          [String(r.partition), String(r.offset), r.time].forEach(function (t) { tr.appendChild(cell(t, false)); });
          tr.appendChild(cell(r.key == null ? "(null)" : r.key, true));
          tr.appendChild(cell(r.value == null ? "(null)" : r.value, true));
          tr.appendChild(cell(hs.join("\n"), true));
          body.insertBefore(tr, body.firstChild);
          while (body.children.length > 500) { body.removeChild(body.lastChild); }
        });
      });
      source.onerror = function () { status.textContent = "reconnecting"; };
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-chart]").forEach(makeChart);
    var btn = document.getElementById("tail-toggle");
    if (btn) { setupTail(btn); }
  });
})();
