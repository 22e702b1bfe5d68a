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

  function jobPoll(card) {
    var url = card.getAttribute("data-job-poll");
    var bar = card.querySelector("[data-bar]");
    var pollStatus = card.querySelector("[data-poll-status]");
    var fields = document.querySelectorAll("[data-field]");
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
          bar.textContent = job.percent + " %";
          fields.forEach(function (el) {
            var k = el.getAttribute("data-field");
            if (!(k in job)) { return; }
            var v = job[k];
            el.textContent = (typeof v === "number" && k !== "percent") ? fmt(v) : (v === null ? "–" : String(v));
          });
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
          if (fresh.hasAttribute("data-live-refresh")) { schedule(); }
        })
        .catch(function (err) {
          if (String(err.message) === "signed out") { return; }
          setTimeout(tick, 5000);
        });
    }
    schedule();
  }

  document.querySelectorAll("form[data-import-form]").forEach(importForm);
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
