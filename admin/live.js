"use strict";
// The live page: everything shown comes from /live.json and goes into
// the page as text (textContent), never as markup: keys come from
// clients. The charts are uPlot's (live/uplot.js).
(function () {
  // Each result the charts draw, in order: its name in /live.json, its
  // label and its colour.
  var RESULTS = [
    ["ok", "allowed", "#2f9e44"],
    ["over_limit", "denied", "#e03131"],
    ["degraded_allowed", "degraded, allowed", "#f08c00"],
    ["degraded_denied", "degraded, denied", "#a61e4d"],
    ["shadowed", "shadow, would deny", "#7048e8"],
    ["unlimited", "unlimited", "#1c7ed6"],
    ["replaced", "replaced", "#868e96"],
    ["no_rule", "no rule", "#adb5bd"]
  ];
  var LABELS = {};
  RESULTS.forEach(function (r) { LABELS[r[0]] = r[1]; });

  var charts = {}; // by chart id: {el, plot, key, width}
  var every = 5000; // ms between fetches: the history's interval

  function $(id) { return document.getElementById(id); }

  function cell(text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    return td;
  }

  function tag(text) {
    var s = document.createElement("span");
    s.className = "tag";
    s.textContent = text;
    return s;
  }

  // ruleCell is a rule's cell: its name and path, and a tag if it is a
  // shadow rule (it reports, it never denies).
  function ruleCell(d) {
    var td = cell(d.path ? d.rule + " (" + d.path + ")" : (d.rule || "(no rule)"));
    if (d.shadow) { td.appendChild(tag("shadow")); }
    return td;
  }

  // fill puts rows in tbody, and hides its table's header while it has
  // none: an empty table shows no column names, only the note above it.
  function fill(tbody, rows) {
    var tr, i, j;
    tbody.replaceChildren();
    tbody.parentNode.tHead.hidden = rows.length === 0;
    for (i = 0; i < rows.length; i++) {
      tr = document.createElement("tr");
      if (rows[i].cls) { tr.className = rows[i].cls; }
      for (j = 0; j < rows[i].length; j++) { tr.appendChild(rows[i][j]); }
      tbody.appendChild(tr);
    }
  }

  function perSecond(x) { return x === null || x === undefined ? "–" : x.toFixed(1) + "/s"; }

  function duration(s) {
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d > 0) { return d + " d " + h + " h"; }
    if (h > 0) { return h + " h " + m + " min"; }
    if (m > 0) { return m + " min" + (s % 60 >= 1 ? " " + Math.floor(s % 60) + " s" : ""); }
    return Math.floor(s) + " s";
  }

  function service(v) {
    var s = v.service, parts = [], i;
    if (!s) { return; }
    $("command").textContent = "bouncer " + s.command;
    $("store").textContent = s.store + (s.store_addrs ? " " + s.store_addrs.join(", ") : "");
    for (i = 0; s.listeners && i < s.listeners.length; i++) { parts.push(s.listeners[i].name + " " + s.listeners[i].addr); }
    $("listeners").textContent = parts.join(" · ");
    $("uptime").textContent = s.started ? duration(v.uptime_seconds) + " (since " + new Date(s.started).toLocaleString() + ")" : "";
  }

  function totals(v) {
    var t = v.totals, all = 0, denied = 0, i, d;
    for (i = 0; i < v.decisions.length; i++) {
      d = v.decisions[i];
      if (d.per_second === null) { continue; }
      all += d.per_second;
      if (d.result === "over_limit" || d.result === "degraded_denied") { denied += d.per_second; }
    }
    $("decided-total").textContent = String(t.decided);
    $("decided-rate").textContent = v.history ? "now " + perSecond(all) : "";
    $("denied-total").textContent = String(t.denied);
    $("denied-rate").textContent = (v.history ? "now " + perSecond(denied) + "; " : "") + t.degraded_denied + " of them degraded";
    $("degraded-total").textContent = String(t.degraded_allowed + t.degraded_denied);
    $("degraded-split").textContent = "(" + t.degraded_allowed + " allowed, " + t.degraded_denied + " denied)";
    $("shadowed-total").textContent = String(t.shadowed);
  }

  // specs returns the charts to draw: all rules together, then each rule.
  function specs(h) {
    var all = {id: "all", title: "All rules", results: {}}, out = [all], i, j, r, k, sum;
    for (i = 0; i < h.rules.length; i++) {
      r = h.rules[i];
      out.push({id: r.domain + "\u0000" + r.rule, title: (r.domain ? r.domain + " · " : "") +
        (r.path ? r.rule + " (" + r.path + ")" : (r.rule || "(no rule)")), shadow: r.shadow, results: r.results});
      for (k in r.results) {
        sum = all.results[k] || (all.results[k] = new Array(h.times.length).fill(0));
        for (j = 0; j < h.times.length; j++) { sum[j] = Math.round((sum[j] + r.results[k][j]) * 100) / 100; }
      }
    }
    return out;
  }

  // mark records on a chart's element what it drew: how many points, of
  // which results, and where its plot area is on the page.
  function mark(el, u, present) {
    var n = 0, i, j, r = u.over.getBoundingClientRect();
    for (i = 1; i < u.data.length; i++) {
      for (j = 0; j < u.data[i].length; j++) { if (u.data[i][j] !== null) { n++; } }
    }
    el.dataset.points = String(n);
    el.dataset.results = present.join(",");
    el.dataset.plot = [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height].map(Math.round).join(",");
  }

  function chart(spec, times, width) {
    var present = RESULTS.filter(function (r) { return spec.results[r[0]]; }), names = present.map(function (r) { return r[0]; });
    var data = [times].concat(present.map(function (r) { return spec.results[r[0]]; }));
    var c = charts[spec.id], el, h3, opts;
    if (c && c.key === names.join(",") && c.width === width) {
      c.plot.setData(data);
      return c.el;
    }
    if (c) { c.plot.destroy(); }
    el = document.createElement("div");
    el.className = spec.id === "all" ? "chart all" : "chart";
    h3 = document.createElement("h3");
    h3.textContent = spec.title;
    if (spec.shadow) { h3.appendChild(tag("shadow")); }
    el.appendChild(h3);
    opts = {
      width: width, height: spec.id === "all" ? 220 : 150,
      scales: {x: {time: true}, y: {range: function (u, lo, hi) { return [0, hi > 0 ? hi * 1.1 : 1]; }}},
      series: [{}].concat(present.map(function (r) {
        return {label: r[1], stroke: r[2], width: 2, points: {show: false},
          value: function (u, x) { return x === null ? "–" : x.toFixed(2) + "/s"; }};
      })),
      axes: [{}, {size: 56}],
      legend: {live: false},
      hooks: {draw: [function (u) { mark(el, u, names); }]}
    };
    charts[spec.id] = {el: el, key: names.join(","), width: width, plot: new uPlot(opts, data, el)};
    return el;
  }

  function history(h) {
    var box = $("charts"), full = Math.min(box.clientWidth || 900, 1400), half, list, els = [], seen = {}, i, id;
    half = full >= 800 ? Math.floor((full - 32) / 2) : full;
    $("window").textContent = "over the last " + duration(h.window_seconds) + ", one point every " + h.every_seconds + " s";
    $("charts-note").textContent = h.times.length === 0 ? "The first point comes " + h.every_seconds + " s after the start." : "";
    list = specs(h);
    for (i = 0; i < list.length; i++) {
      els.push(chart(list[i], h.times, list[i].id === "all" ? full : half));
      seen[list[i].id] = true;
    }
    for (id in charts) {
      if (!seen[id]) { charts[id].plot.destroy(); delete charts[id]; }
    }
    box.replaceChildren.apply(box, els);
  }

  function render(v) {
    var rows = [], i, d, row;
    $("version").textContent = v.config_version;
    service(v);
    totals(v);
    $("degraded").hidden = !v.degraded;
    $("degraded").textContent = v.degraded ? "Deciding without the shared store: " + v.degraded.join("; ") : "";
    if (v.history) {
      every = Math.max(2000, v.history.every_seconds * 1000);
      history(v.history);
    } else {
      $("charts-note").textContent = "No history is kept by this server.";
    }

    for (i = 0; i < v.decisions.length; i++) {
      d = v.decisions[i];
      rows.push([cell(d.domain), ruleCell(d), cell(LABELS[d.result] || d.result, d.result),
        cell(perSecond(d.per_second), "n"), cell(String(d.total), "n")]);
    }
    fill($("decisions"), rows);

    rows = [];
    for (i = 0; i < v.most_denied.length; i++) {
      d = v.most_denied[i];
      rows.push([cell(d.key, "key"), cell(d.domain), cell(d.rule || ""), cell(String(d.denied), "n")]);
    }
    fill($("most-denied"), rows);

    rows = [];
    for (i = 0; i < v.denied_keys.length; i++) {
      d = v.denied_keys[i];
      row = [cell(d.key, "key"), cell(d.domain), cell(d.rule || ""), cell(d.limit + ": " + d.rate + " per " + d.period_seconds + " s"),
        cell(Math.ceil(d.reset_after_seconds) + " s", "n")];
      if (d.shadow) {
        row[2].appendChild(tag("shadow: reported, not denied"));
        row.cls = "shadow";
      }
      rows.push(row);
    }
    fill($("keys"), rows);
    $("keys-note").textContent = v.keys_off ? "The key index is off (--admin-keys 0)." :
      v.keys_error ? "Could not read every key: " + v.keys_error :
      v.denied_keys.length === 0 ? "None of the keys seen last is denied." : "";

    $("redis").hidden = !v.redis;
    if (v.redis) {
      $("redis-connected").textContent = v.redis.connected ? "Connected." : "Never connected yet: deciding by policy while connecting.";
      rows = [];
      for (i = 0; i < v.redis.nodes.length; i++) {
        d = v.redis.nodes[i];
        rows.push([cell(d.node, "key"), d.connecting ? cell("never connected (connecting)", "connecting") : cell(d.breaker.replace("_", "-"), d.breaker),
          cell(d.slow ? "slow" : "", d.slow ? "degraded" : "")]);
      }
      fill($("nodes"), rows);
    }

    $("hybrid").hidden = !v.hybrid;
    if (v.hybrid) {
      d = v.hybrid;
      $("hybrid-leases").textContent = "Leases: " + (d.leases.taken || 0) + " taken, " + (d.leases.returned || 0) +
        " returned, " + (d.leases.expired || 0) + " expired; " + d.units_parked + " units parked here.";
      $("hybrid-local").textContent = "Async syncs: " + d.syncs + " (" + d.over_admitted + " units found over the limit). Over-limit cache: " +
        d.cache_hits + " denied. Pre-throttle: " + d.throttled + " denied.";
      $("hybrid-decisions").textContent = "Decisions: " + (d.decisions.strict || 0) + " strict, " + (d.decisions.lease || 0) +
        " lease, " + (d.decisions.async || 0) + " async.";
    }

    $("reloads").textContent = "Attempts: " + (v.reloads.success || 0) + " taken, " + (v.reloads.unchanged || 0) +
      " unchanged, " + (v.reloads.failure || 0) + " rejected.";
    $("reload-count").textContent = (v.reloads.success || 0) + " reloads, " + (v.reloads.failure || 0) + " rejected";
    rows = [];
    for (i = v.reload_history.length - 1; i >= 0; i--) {
      d = v.reload_history[i];
      rows.push([cell(new Date(d.time).toLocaleTimeString()), cell(d.message, d.result), cell(d.version, "key"), cell((d.problems || []).join("\n"), "problems")]);
    }
    fill($("history"), rows);

    $("status").textContent = "updated " + new Date(v.time).toLocaleTimeString();
  }

  function tick() {
    fetch("live.json", {cache: "no-store"})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(render)
      .catch(function (e) { $("status").textContent = "not updated: " + e.message; })
      .finally(function () { setTimeout(tick, every); });
  }
  tick();
})();
