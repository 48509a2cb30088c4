// stagedoor web console: live updates of the overview, nothing else.
// Hand-written, no dependencies, no build step.  Every page works without it: it only
// re-reads /api/overview every data-interval ms and copies the server's pre-formatted
// strings into the page with textContent (never innerHTML: the values come from Redis
// and are hostile) and the server-computed chart points into the SVG polylines.
"use strict";
(function () {
  var root = document.getElementById("live");
  if (!root || !window.fetch) { return; }
  var url = root.getAttribute("data-live");
  var interval = parseInt(root.getAttribute("data-interval"), 10) || 1000;

  function apply(data) {
    var text = data.text || {};
    var values = data.values || {};
    var fields = root.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      var name = fields[i].getAttribute("data-field");
      if (name === "error") {
        fields[i].textContent = data.error || "";
      } else if (Object.prototype.hasOwnProperty.call(text, name)) {
        fields[i].textContent = String(text[name]);
      }
    }
    var alarms = { trimmed_alarm: values.trimmed_alarm, paused: values.paused,
                   memory: values.memory_full };
    Object.keys(alarms).forEach(function (name) {
      var el = root.querySelector('[data-field="' + name + '"]');
      if (el) { el.classList.toggle("alarm", Boolean(alarms[name])); }
    });
    // only the pause button that applies (the page came with the state of its time)
    if (typeof values.paused === "boolean") {
      var forms = document.querySelectorAll("form[data-show]");
      for (var j = 0; j < forms.length; j++) {
        var want = forms[j].getAttribute("data-show") === "paused";
        forms[j].hidden = want !== values.paused;
      }
    }
    var chart = data.chart || {};
    var lineIn = document.getElementById("chart-in");
    var lineOut = document.getElementById("chart-out");
    var top = document.getElementById("chart-top");
    if (lineIn && typeof chart["in"] === "string") { lineIn.setAttribute("points", chart["in"]); }
    if (lineOut && typeof chart.out === "string") { lineOut.setAttribute("points", chart.out); }
    if (top && typeof chart.top === "string") { top.textContent = chart.top; }
    root.setAttribute("data-updated", String(Date.now()));
  }

  function tick() {
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data && data.ready) { apply(data); } })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { window.setTimeout(tick, interval); });
  }
  window.setTimeout(tick, interval);
}());
