"""The page as the model reads it: an accessibility-style outline of the visible page in which
every interactive element carries a number (`[ref=3]`) that the action tools take.

The numbers live on the elements as a `data-cg-ref` attribute, set afresh by each snapshot,
so a ref always means what the last snapshot showed (or nothing, after a navigation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REF_ATTR = "data-cg-ref"

# Runs in the page. Walks the DOM (open shadow roots included), skipping what is not
# rendered; interactive elements get a ref, text is kept per block, structure indents.
_SNAPSHOT_JS = r"""
(attr) => {
  const MAX_TEXT = 300, MAX_NAME = 100, MAX_OPTIONS = 15;
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    for (const el of roots[i].querySelectorAll('*')) {
      if (el.hasAttribute(attr)) el.removeAttribute(attr);
      if (el.shadowRoot) roots.push(el.shadowRoot);
    }
  }
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'SVG']);
  const SECTIONS = {MAIN: 'main', NAV: 'navigation', HEADER: 'banner', FOOTER: 'contentinfo',
    ASIDE: 'complementary', ARTICLE: 'article', DIALOG: 'dialog', UL: 'list', OL: 'list',
    TABLE: 'table', FIELDSET: 'group'};
  const INTERACTIVE = new Set(['link', 'button', 'checkbox', 'radio', 'combobox', 'listbox',
    'textbox', 'searchbox', 'password', 'slider', 'switch', 'tab', 'menuitem', 'option',
    'spinbutton', 'menuitemcheckbox', 'menuitemradio', 'treeitem', 'clickable']);
  const DEEP = 'a[href],button,input,select,textarea,summary,[role],[contenteditable],' +
    '[onclick],[tabindex],h1,h2,h3,h4,h5,h6,img[alt],iframe,form';
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  // A label's own words, without the options or value of the control inside it.
  const labelText = (l) => {
    const copy = l.cloneNode(true);
    copy.querySelectorAll('select, textarea, input, button').forEach((n) => n.remove());
    return clean(copy.textContent);
  };
  const cut = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);
  const quote = (s) => JSON.stringify(cut(s, MAX_NAME));
  const lines = [];
  let next = 1;

  const shown = (el) => {
    if (el.hidden || el.getAttribute('aria-hidden') === 'true') return false;
    const style = getComputedStyle(el);
    return style.display !== 'none' && style.visibility !== 'hidden' &&
      style.visibility !== 'collapse';
  };
  const inputType = (el) => (el.getAttribute('type') || 'text').toLowerCase();
  const role = (el) => {
    const given = clean(el.getAttribute('role')).split(' ')[0];
    if (given && given !== 'presentation' && given !== 'none') return given;
    switch (el.tagName) {
      case 'A': return el.hasAttribute('href') ? 'link' : null;
      case 'BUTTON': case 'SUMMARY': return 'button';
      case 'SELECT': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
      case 'TEXTAREA': return 'textbox';
      case 'IMG': return 'img';
      case 'H1': case 'H2': case 'H3': case 'H4': case 'H5': case 'H6': return 'heading';
      case 'INPUT': {
        const t = inputType(el);
        if (t === 'hidden') return null;
        if (['button', 'submit', 'reset', 'image'].includes(t)) return 'button';
        if (t === 'checkbox' || t === 'radio' || t === 'password') return t;
        if ((el.getAttribute('autocomplete') || '').toLowerCase().includes('password')) {
          return 'password';
        }
        if (t === 'range') return 'slider';
        if (t === 'number') return 'spinbutton';
        if (t === 'search') return 'searchbox';
        if (t === 'file') return 'file';
        return 'textbox';
      }
    }
    if (el.isContentEditable && el.getAttribute('contenteditable') !== null) return 'textbox';
    if (el.hasAttribute('onclick') || (el.tabIndex >= 0 && el.hasAttribute('tabindex'))) {
      return 'clickable';
    }
    return null;
  };
  const name = (el, r) => {
    const aria = clean(el.getAttribute('aria-label'));
    if (aria) return aria;
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const text = clean(by.split(/\s+/).map((id) => document.getElementById(id))
        .filter(Boolean).map((e) => e.innerText || e.textContent).join(' '));
      if (text) return text;
    }
    if (el.labels && el.labels.length) {
      const text = clean([...el.labels].map(labelText).join(' '));
      if (text) return text;
    }
    if (el.tagName === 'INPUT') {
      const t = inputType(el);
      if (t === 'submit' || t === 'reset' || t === 'button') {
        return clean(el.value) || (t === 'submit' ? 'Submit' : t === 'reset' ? 'Reset' : '');
      }
      if (t === 'image') return clean(el.alt) || 'Submit';
    }
    if (el.tagName === 'IMG') return clean(el.alt);
    if (['textbox', 'searchbox', 'password', 'spinbutton', 'combobox', 'listbox'].includes(r)) {
      return clean(el.placeholder) || clean(el.title) || clean(el.getAttribute('name'));
    }
    const text = clean(el.innerText);
    if (text) return text;
    const img = el.querySelector('img[alt]');
    return clean(img && img.alt) || clean(el.title);
  };
  const emit = (depth, text) => lines.push('  '.repeat(depth) + '- ' + text);
  const describe = (el, r) => {
    const ref = next++;
    el.setAttribute(attr, String(ref));
    let line = `${r} ${quote(name(el, r))} [ref=${ref}]`;
    if (r === 'link') line += ' -> ' + cut(el.getAttribute('href') || '', MAX_NAME);
    if (r === 'heading') line += ` [level=${el.tagName[1]}]`;
    if (r === 'checkbox' || r === 'radio' || r === 'switch') {
      const on = el.checked ?? el.getAttribute('aria-checked') === 'true';
      if (on) line += ' [checked]';
    }
    if (r === 'password') { if (el.value) line += ' [filled]'; }
    else if (el.tagName === 'SELECT') {
      const options = [...el.options];
      const chosen = options.filter((o) => o.selected).map((o) => clean(o.text));
      if (chosen.length) line += ` value=${quote(chosen.join(', '))}`;
      const names = options.slice(0, MAX_OPTIONS).map((o) => quote(clean(o.text)));
      line += ' options: ' + names.join(', ');
      if (options.length > MAX_OPTIONS) line += ` … (${options.length} in all)`;
    } else if ((r === 'textbox' || r === 'searchbox' || r === 'spinbutton') && 'value' in el) {
      if (el.value) line += ` value=${quote(el.value)}`;
    } else if (r === 'textbox' && el.isContentEditable) {
      const text = clean(el.innerText);
      if (text) line += ` value=${quote(text)}`;
    }
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') line += ' [disabled]';
    if (el.required) line += ' [required]';
    return line;
  };
  // skipText: inside a <label>, whose words already name its control.
  const walk = (node, depth, skipText = false) => {
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        const text = clean(child.textContent);
        if (text && !skipText) emit(depth, 'text: ' + cut(text, MAX_TEXT));
        continue;
      }
      if (child.nodeType !== Node.ELEMENT_NODE) continue;
      const el = child;
      if (SKIP.has(el.tagName.toUpperCase()) || !shown(el)) continue;
      if (el.tagName === 'LABEL' && el.control) {
        if (el.contains(el.control)) walk(el, depth, true);
        continue;
      }
      const r = role(el);
      if (r && INTERACTIVE.has(r)) { emit(depth, describe(el, r)); continue; }
      if (r === 'heading') {
        const level = el.tagName[0] === 'H' ? el.tagName[1] : el.getAttribute('aria-level') || '2';
        emit(depth, `heading ${quote(name(el, r))} [level=${level}]`);
        continue;
      }
      if (r === 'img') {
        const alt = name(el, r);
        if (alt) emit(depth, `img ${quote(alt)}`);
        continue;
      }
      if (r === 'file') {
        emit(depth, `file input ${quote(name(el, r))} (uploads are not supported)`);
        continue;
      }
      if (el.tagName === 'IFRAME') {
        emit(depth, `iframe ${quote(el.getAttribute('src') || '')} (its content is not shown)`);
        continue;
      }
      if (el.tagName === 'FORM') {
        const action = el.getAttribute('action');
        const method = (el.method || 'get').toUpperCase();
        const target = action ? ` -> ${method} ${cut(action, MAX_NAME)}` : '';
        const label = clean(el.getAttribute('aria-label') || el.getAttribute('name'));
        emit(depth, 'form' + (label ? ' ' + quote(label) : '') + target);
        walk(el, depth + 1);
        continue;
      }
      const inner = el.shadowRoot ? null : el.querySelector(DEEP);
      if (!inner && !el.shadowRoot && !SECTIONS[el.tagName]) {
        const text = clean(el.innerText);
        if (text && !skipText) emit(depth, 'text: ' + cut(text, MAX_TEXT));
        continue;
      }
      if (el.shadowRoot) walk(el.shadowRoot, depth, skipText);
      const section = SECTIONS[el.tagName] || (r && r !== 'generic' ? r : null);
      if (section) {
        const label = clean(el.getAttribute('aria-label'));
        emit(depth, section + (label ? ' ' + quote(label) : '') + ':');
        walk(el, depth + 1, skipText);
      } else {
        walk(el, depth, skipText);
      }
    }
  };
  if (document.body) walk(document.body, 0);
  return {lines, refs: next - 1};
}
"""

# What the approval and password checks need to know about one element.
DESCRIBE_JS = r"""
(el) => {
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const labelText = (l) => {
    const copy = l.cloneNode(true);
    copy.querySelectorAll('select, textarea, input, button').forEach((n) => n.remove());
    return clean(copy.textContent);
  };
  const typeOf = (b) => (b.getAttribute('type') || '').toLowerCase();
  const type = typeOf(el);
  const form = el.form || el.closest('form');
  const submitter = (b) => (b.tagName === 'BUTTON' && ['', 'submit'].includes(typeOf(b))) ||
    (b.tagName === 'INPUT' && ['submit', 'image'].includes(typeOf(b)));
  const pressable = (b) => b.tagName !== 'INPUT' || submitter(b) || typeOf(b) === 'button';
  // A field's value is what was typed into it (maybe a password), never its name.
  const label = (b) => clean(b.getAttribute('aria-label')) ||
    (b.labels ? clean([...b.labels].map(labelText).join(' ')) : '') ||
    (pressable(b) ? clean(b.innerText || b.value || b.alt) : '') ||
    clean(b.placeholder) || clean(b.title) || clean(b.getAttribute('name'));
  const auto = (el.getAttribute('autocomplete') || '').toLowerCase();
  const action = form && form.getAttribute('action') !== null ? form.action : location.href;
  return {
    tag: el.tagName.toLowerCase(),
    type,
    name: label(el),
    href: el.tagName === 'A' && el.href ? el.href : '',
    isSubmit: !!form && submitter(el),
    isPassword: (el.tagName === 'INPUT' && type === 'password') || auto.includes('password'),
    formAction: form ? action : '',
    formMethod: form ? (form.method || 'get').toUpperCase() : '',
    formButtons: form ? [...form.querySelectorAll('button, input')].filter(submitter).map(label)
      : [],
    pageUrl: location.href,
  };
}
"""


@dataclass(frozen=True)
class Snapshot:
    text: str
    refs: int
    next_offset: int | None  # set when the outline was cut: where the rest starts


@dataclass(frozen=True)
class ElementInfo:
    tag: str
    type: str
    name: str
    href: str
    is_submit: bool
    is_password: bool
    form_action: str
    form_method: str
    form_buttons: tuple[str, ...]
    page_url: str

    @classmethod
    def from_js(cls, data: dict[str, Any]) -> ElementInfo:
        return cls(
            tag=str(data.get("tag", "")),
            type=str(data.get("type", "")),
            name=str(data.get("name", "")),
            href=str(data.get("href", "")),
            is_submit=bool(data.get("isSubmit")),
            is_password=bool(data.get("isPassword")),
            form_action=str(data.get("formAction", "")),
            form_method=str(data.get("formMethod", "")),
            form_buttons=tuple(str(b) for b in data.get("formButtons", ()) if b),
            page_url=str(data.get("pageUrl", "")),
        )


def snapshot_script() -> str:
    return _SNAPSHOT_JS


def render(lines: list[str], refs: int, max_chars: int, offset: int = 0) -> Snapshot:
    """The outline from character `offset` on, cut at a line boundary to fit `max_chars`."""
    out: list[str] = []
    position = 0  # character offset of the current line in the whole outline
    size = 0
    for line in lines:
        start, position = position, position + len(line) + 1
        if start < offset:
            continue
        if out and size + len(line) + 1 > max_chars:
            shown = sum(1 for kept in out if "[ref=" in kept)
            out.append(
                f"[snapshot cut: {shown} of {refs} elements shown; call browser_snapshot with "
                f"offset={start} for the rest]"
            )
            return Snapshot("\n".join(out), refs, start)
        out.append(line[:max_chars])
        size += len(line) + 1
    if not out:
        text = "(the page shows nothing)" if not offset else "(nothing past this offset)"
        return Snapshot(text, refs, None)
    return Snapshot("\n".join(out), refs, None)
