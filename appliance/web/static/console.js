/* The appliance console's only script: no framework, no external files.
   - the import form uploads with a progress line and shows a refusal (413) in place;
   - a job page polls its job every 500 ms and moves the bar until the job ends;
   - pages marked data-refresh reload themselves while something is in flight;
   - a region marked data-live-refresh (the dashboard's figures) is fetched again
     from its URL and swapped in place, as long as the fresh copy still asks for it.
   Everything works without this file too: forms post normally and pages reload. */
(function () {
  "use strict";

  var nf = new Intl.NumberFormat("en-US");
  function fmt(n) { return n === null || n === undefined ? "–" : nf.format(n).replace(/,/g, "\u2009"); }

  function showError(box, data, sentBytes) {
    box.textContent = "";
    var head = document.createElement("strong");
    if (data.error === "too_many_rows") {
      head.textContent = "Too many lines: " + fmt(data.submitted) + " submitted, the limit is " + fmt(data.limit) + ".";
    } else if (data.error === "payload_too_large") {
      head.textContent = "Too large: the limit is " + fmt(data.limit) + " bytes, " + fmt(data.submitted_bytes || sentBytes) + " were sent.";
    } else {
      head.textContent = "Not imported.";
    }
    var text = document.createElement("span");
    text.textContent = data.message || "The appliance refused the list.";
    box.appendChild(head);
    box.appendChild(text);
    box.hidden = false;
    box.setAttribute("data-error", data.error || "");
    box.scrollIntoView({ block: "nearest" });
  }

  function importForm(form) {
    var box = document.querySelector("[data-import-error]");
    var button = form.querySelector("[data-submit]");
    var status = form.querySelector("[data-upload-status]");
    var text = form.querySelector("textarea[data-drop-target]");
    var file = form.querySelector("input[type=file]");

    if (text && file) {
      text.addEventListener("dragover", function (e) { e.preventDefault(); text.classList.add("dropping"); });
      text.addEventListener("dragleave", function () { text.classList.remove("dropping"); });
      text.addEventListener("drop", function (e) {
        text.classList.remove("dropping");
        if (e.dataTransfer && e.dataTransfer.files.length) {
          e.preventDefault();
          file.files = e.dataTransfer.files;
          status.textContent = "File chosen: " + e.dataTransfer.files[0].name;
          file.dispatchEvent(new Event("change"));
        }
      });
    }

    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var body = new FormData(form);
      var token = body.get("csrf_token");
      var xhr = new XMLHttpRequest();
      var sent = 0;
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("X-CSRF-Token", token);
      xhr.upload.onprogress = function (ev) {
        sent = ev.total;
        if (ev.lengthComputable && ev.total > 256 * 1024) {
          status.textContent = "Uploading " + Math.round(100 * ev.loaded / ev.total) + " %";
        }
      };
      xhr.onload = function () {
        var data = {};
        try { data = JSON.parse(xhr.responseText); } catch (err) { data = { message: "Unexpected answer (" + xhr.status + ")." }; }
        if (xhr.status === 202 || xhr.status === 200) {
          status.textContent = "Accepted: opening the job…";
          window.location.assign(data.url);
          return;
        }
        if (xhr.status === 401 && data.login) {
          window.location.assign(data.login + "?next=/import");
          return;
        }
        button.disabled = false;
        status.textContent = "";
        showError(box, data, sent);
      };
      xhr.onerror = function () {
        button.disabled = false;
        status.textContent = "";
        showError(box, { message: "The appliance could not be reached. Nothing was lost: submit again when it is back (the same list makes the same job)." }, sent);
      };
      box.hidden = true;
      button.disabled = true;
      status.textContent = "Sending…";
      xhr.send(body);
    });
  }

  /* The import preview: the head of the chosen file (or the pasted text) goes to
     /import/preview, and the answer (the importer's reading of the first lines) is
     shown as a table under the form. Nothing is stored. */
  function importPreview(form) {
    var section = document.querySelector("[data-preview]");
    var body = section && section.querySelector("[data-preview-body]");
    var text = form.querySelector("textarea[data-drop-target]");
    var file = form.querySelector("input[type=file]");
    if (!section || !body) { return; }
    var HEAD = 64 * 1024;
    var timer = null;
    function cell(tr, value, cls) {
      var td = document.createElement("td");
      td.textContent = value === null || value === undefined ? "" : String(value);
      if (cls) { td.className = cls; }
      tr.appendChild(td);
    }
    function show(data) {
      body.textContent = "";
      section.hidden = false;
      if (data.error) {
        var p = document.createElement("p");
        p.className = "alert";
        p.textContent = data.error || data.message;
        body.appendChild(p);
        return;
      }
      var wrap = document.createElement("div");
      wrap.className = "scroll";
      var table = document.createElement("table");
      table.className = "preview-table";
      var head = table.createTHead().insertRow();
      var titles = ["Line"];
      for (var i = 0; i < data.columns; i++) { titles.push("Column " + (i + 1)); }
      titles.push("Number read", "Name", "Outcome");
      titles.forEach(function (t) { var th = document.createElement("th"); th.scope = "col"; th.textContent = t; head.appendChild(th); });
      var tbody = table.createTBody();
      data.rows.forEach(function (r) {
        var tr = tbody.insertRow();
        tr.className = r.outcome;
        cell(tr, r.line_number, "num");
        for (var i = 0; i < data.columns; i++) { cell(tr, i < r.cells.length ? r.cells[i] : ""); }
        cell(tr, r.msisdn);
        cell(tr, r.name);
        cell(tr, r.outcome === "header" ? "header row: skipped" : (r.outcome === "rejected" ? "rejected: " + r.reason : "imported"),
             r.outcome === "rejected" ? "reason" : "");
      });
      wrap.appendChild(table);
      body.appendChild(wrap);
      if (data.blank) {
        var note = document.createElement("p");
        note.className = "hint";
        note.textContent = data.blank + (data.blank === 1 ? " blank line" : " blank lines") + " among them (counted, not rejected).";
        body.appendChild(note);
      }
    }
    function ask() {
      var data = new FormData();
      data.append("csrf_token", form.querySelector("input[name=csrf_token]").value);
      data.append("region", form.querySelector("[name=region]").value);
      var chosen = file && file.files && file.files.length ? file.files[0] : null;
      if (chosen) {
        data.append("file", chosen.slice(0, HEAD), chosen.name);
        data.append("partial", chosen.size > HEAD ? "1" : "0");
      } else if (text && text.value.trim()) {
        data.append("text", text.value.slice(0, HEAD));
        data.append("partial", text.value.length > HEAD ? "1" : "0");
      } else {
        section.hidden = true;
        return;
      }
      fetch("/import/preview", { method: "POST", body: data, credentials: "same-origin",
                                 headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(show)
        .catch(function () { /* the preview is a convenience: the import itself still works */ });
    }
    function soon() { clearTimeout(timer); timer = setTimeout(ask, 400); }
    if (file) { file.addEventListener("change", soon); }
    if (text) { text.addEventListener("input", soon); }
    var button = form.querySelector("[data-preview-button]");
    if (button) { button.addEventListener("click", function (e) { e.preventDefault(); ask(); }); }
  }

  /* A percentage as the pages print it: one decimal ("25.0 %" beside "100.0 %"). */
  function pct(n) { return Number(n).toFixed(1); }

  /* The rate "now": rows read per second over the polls of the last few seconds, as
     this page saw them. The job's own rows_per_s is its average since it started (the
     figure its finished page shows as such): early on that one is far off. */
  function rateNow(samples, processed) {
    var t = Date.now();
    samples.push([t, processed]);
    while (samples.length > 2 && t - samples[1][0] >= 5000) { samples.shift(); }
    if (samples.length < 2 || t - samples[0][0] < 400) { return null; }
    return Math.max(0, Math.round(1000 * (processed - samples[0][1]) / (t - samples[0][0])));
  }

  function jobPoll(card) {
    var url = card.getAttribute("data-job-poll");
    var bar = card.querySelector("[data-bar]");
    var pollStatus = card.querySelector("[data-poll-status]");
    var fields = document.querySelectorAll("[data-field]");
    var now = card.querySelector("[data-rate-now]");
    var samples = [];
    function tick() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 401) { window.location.assign("/login?next=" + encodeURIComponent(location.pathname)); throw new Error("signed out"); }
          if (!r.ok) { throw new Error("status " + r.status); }
          return r.json();
        })
        .then(function (job) {
          pollStatus.textContent = "";
          bar.max = job.total;
          bar.value = job.processed;
          bar.textContent = pct(job.percent) + " %";
          fields.forEach(function (el) {
            var k = el.getAttribute("data-field");
            if (!(k in job) || k === "rows_per_s") { return; }
            var v = job[k];
            el.textContent = k === "percent" ? pct(v) : (typeof v === "number" ? fmt(v) : (v === null ? "–" : String(v)));
          });
          if (now) { now.textContent = fmt(rateNow(samples, job.processed)); }
          if (job.finished) {
            window.location.reload();
            return;
          }
          setTimeout(tick, 500);
        })
        .catch(function (err) {
          if (String(err.message) === "signed out") { return; }
          pollStatus.textContent = "(reconnecting…)";
          setTimeout(tick, 1000);
        });
    }
    setTimeout(tick, 300);
  }

  function liveRegion(region) {
    var current = region;
    function schedule() {
      var s = parseFloat(current.getAttribute("data-interval")) || 5;
      setTimeout(tick, s * 1000);
    }
    function tick() {
      var url = current.getAttribute("data-live-refresh");
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 401 || r.redirected) { window.location.assign("/login?next=" + encodeURIComponent(location.pathname)); throw new Error("signed out"); }
          if (!r.ok) { throw new Error("status " + r.status); }
          return r.text();
        })
        .then(function (html) {
          var holder = document.createElement("template");
          holder.innerHTML = html.trim();
          var fresh = holder.content.querySelector("[data-live-refresh]") || holder.content.firstElementChild;
          if (!fresh) { return; }
          var open = Array.prototype.map.call(current.querySelectorAll("details"), function (d) { return d.open; });
          fresh.querySelectorAll("details").forEach(function (d, i) { if (open[i]) { d.open = true; } });
          current.replaceWith(fresh);
          current = fresh;
          latestHours(fresh);
          if (fresh.hasAttribute("data-live-refresh")) { schedule(); }
        })
        .catch(function (err) {
          if (String(err.message) === "signed out") { return; }
          setTimeout(tick, 5000);
        });
    }
    schedule();
  }

  /* On a narrow screen the chart scrolls sideways: start at its right end, the latest hours. */
  function latestHours(root) {
    root.querySelectorAll(".chart-scroll").forEach(function (el) { el.scrollLeft = el.scrollWidth; });
  }

  latestHours(document);
  document.querySelectorAll("form[data-import-form]").forEach(importForm);
  document.querySelectorAll("form[data-import-form]").forEach(importPreview);
  document.querySelectorAll("[data-live-refresh]").forEach(liveRegion);
  document.querySelectorAll("[data-job-poll]").forEach(jobPoll);
  document.querySelectorAll("[data-refresh]").forEach(function (el) {
    var s = parseFloat(el.getAttribute("data-refresh")) || 5;
    setTimeout(function () { window.location.reload(); }, s * 1000);
  });
  document.querySelectorAll("[data-confirm-back]").forEach(function (el) {
    el.addEventListener("click", function (e) { e.preventDefault(); history.back(); });
  });
})();
