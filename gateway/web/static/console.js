// chatgate console: live parts over server-sent events, and confirmations for forms.
// No inline script is allowed by the page's Content-Security-Policy; this file is all there is.
(function () {
  "use strict";
  var waiting = {}; // part name -> html held back while someone types in that part

  function busy(part) {
    var active = document.activeElement;
    return active && part.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }

  function apply(name, html) {
    var part = document.querySelector('[data-part="' + name + '"]');
    if (!part) return;
    if (busy(part)) { waiting[name] = html; return; }
    delete waiting[name];
    part.innerHTML = html;
  }

  document.addEventListener("focusout", function () {
    setTimeout(function () {
      Object.keys(waiting).forEach(function (name) { apply(name, waiting[name]); });
    }, 300);
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  var body = document.body;
  var url = body.getAttribute("data-events");
  if (url && window.EventSource) {
    var source = new EventSource(url);
    source.addEventListener("part", function (event) {
      var data = JSON.parse(event.data);
      apply(data.name, data.html);
    });
    source.addEventListener("signedout", function () {
      source.close();
      window.location.href = body.getAttribute("data-login");
    });
  }
})();
