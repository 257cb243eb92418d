// chatgate web chat: live messages over server-sent events, sending, buttons, files.
// Message HTML comes rendered and made safe by the server; everything else is set as text.
(function () {
  "use strict";
  var body = document.body;
  var root = body.getAttribute("data-root");
  var csrf = body.getAttribute("data-csrf");
  var current = body.getAttribute("data-conversation") || "";
  var list = document.getElementById("messages");
  var typing = document.getElementById("typing");
  var toast = document.getElementById("toast");
  var form = document.getElementById("composer");
  var text = document.getElementById("text");
  var files = document.getElementById("files");
  var chosen = document.getElementById("chosen");
  var conversations = document.getElementById("conversations");
  var source = null;
  var typingTimer = null;
  var toastTimer = null;

  function el(tag, className, content) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined) node.textContent = content;
    return node;
  }

  function size(bytes) {
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1048576) return Math.round(bytes / 1024) + " KB";
    return (bytes / 1048576).toFixed(1) + " MB";
  }

  function nearBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  }

  function draw(message) {
    var stick = nearBottom();
    var node = document.getElementById("m-" + message.id);
    var fresh = !node;
    if (fresh) node = el("div");
    node.id = "m-" + message.id;
    node.className = "msg " + message.role + (message.deleted ? " deleted" : "");
    node.innerHTML = message.deleted ? "" : message.html;
    if (message.deleted) node.textContent = "(deleted)";
    if (message.files && message.files.length) {
      var box = el("div", "files");
      message.files.forEach(function (file) {
        var link = el("a");
        link.href = file.url;
        if (file.image) {
          var img = el("img");
          img.src = file.url;
          img.alt = file.name;
          link.appendChild(img);
        } else {
          link.textContent = file.name + " (" + size(file.size) + ")";
          link.setAttribute("download", file.name);
        }
        box.appendChild(link);
      });
      node.appendChild(box);
    }
    if (message.buttons && message.buttons.length) {
      var row = el("div", "buttons");
      message.buttons.forEach(function (buttons) {
        buttons.forEach(function (button) {
          var b = el("button", button.style === "primary" ? "primary" : (button.style === "danger" ? "danger" : ""), button.label);
          b.type = "button";
          b.addEventListener("click", function () { press(message.id, button.data, b); });
          row.appendChild(b);
        });
      });
      node.appendChild(row);
    }
    if (fresh) list.appendChild(node);
    if (message.role === "bot") typing.hidden = true;
    if (fresh && (stick || message.role === "user")) list.scrollTop = list.scrollHeight;
    else if (stick) list.scrollTop = list.scrollHeight;
  }

  function say(message, alert) {
    toast.textContent = message;
    toast.className = "toast" + (alert ? " alert" : "");
    toast.hidden = !message;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { toast.hidden = true; }, 6000);
  }

  function mark(id, title) {
    var link = conversations.querySelector('a[data-id="' + id + '"]');
    if (!link) {
      link = el("a", "", title || "New conversation");
      link.href = root + "?c=" + encodeURIComponent(id);
      link.setAttribute("data-id", id);
    }
    conversations.insertBefore(link, conversations.firstChild);
    Array.prototype.forEach.call(conversations.children, function (a) {
      a.classList.toggle("on", a.getAttribute("data-id") === current);
    });
    return link;
  }

  function connect() {
    if (source) source.close();
    list.textContent = "";
    typing.hidden = true;
    source = new EventSource(root + "/events?c=" + encodeURIComponent(current));
    source.addEventListener("snapshot", function (event) {
      var data = JSON.parse(event.data);
      if (data.conversation !== current) return;
      list.textContent = "";
      data.messages.forEach(draw);
      list.scrollTop = list.scrollHeight;
    });
    source.addEventListener("message", function (event) {
      var data = JSON.parse(event.data);
      if (data.conversation === current) draw(data.message);
      else mark(data.conversation).classList.add("unread");
    });
    source.addEventListener("typing", function (event) {
      var data = JSON.parse(event.data);
      if (data.conversation !== current) return;
      typing.hidden = false;
      clearTimeout(typingTimer);
      typingTimer = setTimeout(function () { typing.hidden = true; }, 6000);
    });
    source.addEventListener("signedout", function () {
      source.close();
      window.location.href = root + "/login";
    });
  }

  function switchTo(id, title) {
    current = id;
    history.replaceState(null, "", id ? root + "?c=" + encodeURIComponent(id) : root);
    var heading = document.getElementById("chat-title");
    if (id) {
      var link = mark(id, title);
      link.classList.remove("unread");
      heading.textContent = link.textContent;
    } else heading.textContent = "New conversation";
    if (!id) {
      Array.prototype.forEach.call(conversations.children, function (a) { a.classList.remove("on"); });
    }
    document.getElementById("sidebar").classList.remove("open");
    connect();
  }

  function press(messageId, data, button) {
    button.disabled = true;
    fetch(root + "/press", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ conversation: current, message: messageId, data: data })
    }).then(function (r) { return r.json(); }).then(function (reply) {
      say(reply.toast || reply.error || "", reply.alert);
      button.disabled = false;
    }).catch(function () { say("Could not reach the gateway; try again.", true); button.disabled = false; });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!text.value.trim() && !files.files.length) return;
    var data = new FormData();
    data.append("conversation", current);
    data.append("text", text.value);
    data.append("nonce", Date.now().toString(36) + Math.random().toString(36).slice(2));
    Array.prototype.forEach.call(files.files, function (file) { data.append("files", file, file.name); });
    var sent = text.value;
    text.value = "";
    document.getElementById("send").disabled = true;
    fetch(root + "/send", {
      method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf }, body: data
    }).then(function (r) {
      return r.json().catch(function () { return { error: "The gateway refused the message (" + r.status + ")." }; });
    }).then(function (reply) {
      document.getElementById("send").disabled = false;
      if (reply.error) { say(reply.error, true); text.value = sent; return; }
      files.value = "";
      chosen.textContent = "";
      if (reply.conversation !== current) switchTo(reply.conversation, sent.slice(0, 60));
    }).catch(function () {
      document.getElementById("send").disabled = false;
      text.value = sent;
      say("Could not reach the gateway; try again.", true);
    });
  });

  text.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  files.addEventListener("change", function () {
    chosen.textContent = Array.prototype.map.call(files.files, function (f) { return f.name; }).join(", ");
  });
  document.getElementById("new-conversation").addEventListener("click", function () { switchTo(""); text.focus(); });
  document.getElementById("toggle-sidebar").addEventListener("click", function () {
    document.getElementById("sidebar").classList.toggle("open");
  });
  conversations.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-id]");
    if (!link) return;
    event.preventDefault();
    switchTo(link.getAttribute("data-id"));
  });
  if (current) history.replaceState(null, "", root + "?c=" + encodeURIComponent(current));
  connect();
})();
