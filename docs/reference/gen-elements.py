#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The element reference of a GStreamer plugin, in the manner of
GStreamer's plugin pages, and its check.

Loads the plugin file alone (no other plugin: the pages do not depend on
what the machine has installed), and writes into OUTDIR one Markdown page
per element (NAME.md) and the plugin's page (index.md):

- the description: the element's `SECTION:element-NAME` doc block, read
  from the plugin's sources, with its example launch lines;
- the hierarchy, the interfaces and the factory details;
- the pad templates: name, direction, presence, pad type and caps;
- the signals and action signals with their C signatures and the doc
  block `GstType::NAME:` of each;
- every property the element defines: blurb, type, range or values,
  default (as the property declares it) and flags.

With --check, it fails (exit 1, one line per problem) when the plugin's
documentation breaks the rule of docs/reference.md, "The element rule":
an element without a doc block, or whose doc block has no example launch
line (a `gst-launch-1.0` line in a code block under a heading "Example
launch line(s)"); factory details left empty; a property without a blurb,
with a blurb that only repeats its name or nick, or with a placeholder; a
request or sometimes pad template whose name the doc block never gives; a
signal without a doc block.

Usage: gen-elements.py --plugin FILE --sources DIR [--output OUTDIR] [--check]
"""

import argparse
import glob
import os
import re
import sys
import tempfile

# A registry of its own, before GStreamer starts: the plugin file given,
# and the system's plugins, which the elements' instances use inside
# (the pages show what the elements declare, not what the system has).
os.environ["GST_PLUGIN_PATH_1_0"] = ""
os.environ.setdefault("GST_REGISTRY_FORK", "no")
_registry_dir = tempfile.TemporaryDirectory(prefix="legba-elements-")
os.environ["GST_REGISTRY_1_0"] = os.path.join(_registry_dir.name, "r.bin")

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import GObject, Gst  # noqa: E402

PLACEHOLDERS = re.compile(r"^(fixme|todo|xxx|tbd|blurb|description|"
                          r"undocumented|none|-)\b", re.I)
LAUNCH_HEADING = re.compile(r"^#+\s*Example launch lines?\s*$", re.I | re.M)

# GParamFlags, and GStreamer's own above G_PARAM_USER_SHIFT
READABLE, WRITABLE, CONSTRUCT, CONSTRUCT_ONLY = 1, 2, 4, 8
DEPRECATED = 1 << 31
GST_CONTROLLABLE = 1 << 9
GST_MUTABLE_READY, GST_MUTABLE_PAUSED, GST_MUTABLE_PLAYING = (
    1 << 10, 1 << 11, 1 << 12)
SIGNAL_ACTION = 1 << 5
SIGNAL_RUN_FIRST, SIGNAL_RUN_LAST, SIGNAL_RUN_CLEANUP = 1, 2, 4


# ---- The sources' doc blocks ----

def doc_blocks(sources):
    """Every gtk-doc block of the sources: {name: (text, file)}."""
    blocks = {}
    for path in sorted(glob.glob(os.path.join(sources, "*.c"))):
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"/\*\*\n(.*?)\*/", text, re.S):
            lines = [re.sub(r"^\s*\* ?", "", ln)
                     for ln in m.group(1).rstrip().split("\n")]
            first = lines[0].strip()
            if first.startswith("SECTION:"):
                name = first
            elif first.endswith(":"):
                name = first[:-1].strip()
            else:
                continue
            body = [ln for ln in lines[1:]
                    if not re.match(r"^@(title|short_description|see_also):",
                                    ln)]
            blocks[name] = ("\n".join(body).strip("\n"),
                            os.path.basename(path))
    return blocks


def gtkdoc_to_markdown(text):
    """gtk-doc markup to Markdown: code blocks, #Type, %CONST."""
    out = []
    in_code = False
    for line in text.split("\n"):
        m = re.match(r"^\s*\|\[(?:<!-- language=\"(\w+)\" -->)?\s*$", line)
        if m and not in_code:
            out.append("```" + (m.group(1) or "").lower())
            in_code = True
            continue
        if in_code and line.strip() == "]|":
            out.append("```")
            in_code = False
            continue
        if not in_code:
            line = re.sub(r"#([A-Z]\w+)(::?[\w-]+)?",
                          lambda m: "`%s%s`" % (m.group(1),
                                                m.group(2) or ""), line)
            line = re.sub(r"%([A-Z][A-Z0-9_]+)", r"`\1`", line)
            line = re.sub(r"^(#+) ", r"#\1 ", line)
        out.append(line)
    return "\n".join(out).strip("\n")


def launch_lines(text):
    """The gst-launch-1.0 lines in code blocks after an "Example launch
    line(s)" heading."""
    m = LAUNCH_HEADING.search(text)
    if not m:
        return []
    after = text[m.end():]
    found = []
    for block in re.findall(r"\|\[(.*?)\]\|", after, re.S):
        if "gst-launch-1.0" in block:
            found.append(block.strip())
    return found


# ---- Values, types and flags as GStreamer's pages give them ----

def type_name(gtype):
    return gtype.name if gtype else "void"


def c_type(gtype):
    """The C type of a signal argument or return value."""
    fundamental = gtype.fundamental
    if fundamental in (GObject.TYPE_OBJECT, GObject.TYPE_BOXED,
                       GObject.TYPE_INTERFACE, GObject.TYPE_POINTER):
        return gtype.name + " *"
    if fundamental == GObject.TYPE_STRING:
        return "gchar *"
    return gtype.name


def format_value(pspec, value):
    if value is None:
        return "NULL"
    vt = pspec.value_type
    if vt.fundamental == GObject.TYPE_BOOLEAN:
        return "true" if value else "false"
    if vt.fundamental == GObject.TYPE_STRING:
        return '"%s"' % value
    if vt.fundamental == GObject.TYPE_ENUM:
        return enum_nick(vt, int(value))
    if vt.fundamental in (GObject.TYPE_OBJECT, GObject.TYPE_BOXED,
                          GObject.TYPE_INTERFACE):
        if isinstance(value, Gst.Structure):
            return '"%s"' % value.to_string()
        return "NULL" if value is None else type_name(vt)
    if isinstance(value, float):
        return ("%g" % value)
    return str(value)


def enum_values(gtype):
    cls = gtype.pytype or gi._gi.enum_add(gtype)
    return [cls.__enum_values__[k] for k in sorted(cls.__enum_values__)]


def enum_nick(gtype, value):
    for ev in enum_values(gtype):
        if int(ev) == value:
            return "%s (%d)" % (ev.value_nick, value)
    return str(value)


def pspec_range(pspec):
    if hasattr(pspec, "minimum") and hasattr(pspec, "maximum"):
        lo, hi = pspec.minimum, pspec.maximum
        fmt = "%g" if isinstance(lo, float) else "%d"
        return "%s – %s" % (fmt % lo, fmt % hi)
    return None


def flags_text(flags):
    parts = []
    if flags & READABLE:
        parts.append("Read")
    if flags & WRITABLE:
        parts.append("Write")
    if flags & CONSTRUCT_ONLY:
        parts.append("Construct Only")
    elif flags & CONSTRUCT:
        parts.append("Construct")
    if flags & GST_CONTROLLABLE:
        parts.append("Controllable")
    if flags & DEPRECATED:
        parts.append("Deprecated")
    text = " / ".join(parts)
    if flags & WRITABLE:
        if flags & GST_MUTABLE_PLAYING:
            text += "; changeable in NULL, READY, PAUSED or PLAYING state"
        elif flags & GST_MUTABLE_PAUSED:
            text += "; changeable only in NULL, READY or PAUSED state"
        elif flags & GST_MUTABLE_READY:
            text += "; changeable only in NULL or READY state"
    return text


def caps_text(caps):
    """One structure a paragraph, one field a line, as GStreamer's pages."""
    if caps.is_any():
        return "ANY"
    if caps.is_empty():
        return "EMPTY"
    out = []
    for i in range(caps.get_size()):
        s = caps.get_structure(i).to_string().rstrip(";")
        fields = split_top(s)
        head = fields[0]
        feats = caps.get_features(i)
        if feats and not feats.is_any() and feats.to_string() != \
                "memory:SystemMemory":
            head += "(%s)" % feats.to_string()
        out.append(head + ":")
        for f in fields[1:]:
            name, _, value = f.partition("=")
            value = re.sub(r"^\(\w+\)", "", value.strip())
            out.append("%18s: %s" % (name.strip(), value))
        out.append("")
    return "\n".join(out).rstrip()


def split_top(text):
    """Splits a structure's string at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[<(":
            depth += 1
        elif ch in "}]>)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def hierarchy(gtype):
    chain = []
    t = gtype
    while t and t.name != "invalid":
        chain.append(t.name)
        t = t.parent
    return list(reversed(chain))


# ---- One element ----

class Element:
    def __init__(self, factory, blocks):
        self.factory = factory.load()
        self.name = self.factory.get_name()
        self.gtype = self.factory.get_element_type()
        self.doc, self.doc_file = blocks.get("SECTION:element-" + self.name,
                                             (None, None))
        self.instance = self.factory.create(None)
        self.blocks = blocks
        self.properties = [p for p in GObject.list_properties(self.gtype)
                           if p.owner_type == self.gtype]
        self.signals = [GObject.signal_query(i)
                        for i in GObject.signal_list_ids(self.gtype)]
        # sink pads first, as GStreamer's pages
        self.templates = sorted(
            self.instance.get_pad_template_list(),
            key=lambda t: (t.direction != Gst.PadDirection.SINK,
                           t.name_template))

    def meta(self, key):
        return self.factory.get_metadata(key) or ""

    def signal_doc(self, name):
        return self.blocks.get("%s::%s" % (self.gtype.name, name),
                               (None, None))[0]

    def problems(self):
        where = "element %s" % self.name
        if self.doc is None:
            yield "%s: no SECTION:element-%s doc block in the plugin's " \
                "sources" % (where, self.name)
        elif not launch_lines(self.doc):
            yield "%s (%s): no example launch line (a gst-launch-1.0 line " \
                "in a |[ ]| block under a heading \"Example launch " \
                "line(s)\")" % (where, self.doc_file)
        for key in ("long-name", "klass", "description", "author"):
            if not self.meta(key).strip():
                yield "%s: empty factory detail %s" % (where, key)
        for p in self.properties:
            blurb = (p.blurb or "").strip()
            if not blurb:
                yield "%s: property %s has no blurb" % (where, p.name)
            elif blurb.lower().rstrip(".") in (p.name.lower(),
                                               (p.nick or "").lower(),
                                               p.name.replace("-", " ")):
                yield "%s: property %s's blurb only repeats its name: " \
                    "\"%s\"" % (where, p.name, blurb)
            elif PLACEHOLDERS.match(blurb) or len(blurb.split()) < 3:
                yield "%s: property %s's blurb is a placeholder: \"%s\"" % (
                    where, p.name, blurb)
        for t in self.templates:
            if t.presence == Gst.PadPresence.ALWAYS:
                continue
            if self.doc is not None and t.name_template not in self.doc:
                yield "%s: the %s pad template %s is not named in its doc " \
                    "block" % (where, t.presence.value_nick, t.name_template)
        for s in self.signals:
            if not self.signal_doc(s.signal_name):
                yield "%s: signal %s has no doc block %s::%s" % (
                    where, s.signal_name, self.gtype.name, s.signal_name)

    # -- the page --

    def page(self, plugin):
        out = ["# %s" % self.name, ""]
        if self.doc:
            out += [gtkdoc_to_markdown(self.doc), ""]
        out += ["## Hierarchy", "", "```"]
        for depth, name in enumerate(hierarchy(self.gtype)):
            indent = "    " * (depth - 1) + "╰── " if depth else ""
            out.append(indent + name)
        out += ["```", ""]
        ifaces = [i.name for i in self.gtype.interfaces]
        if ifaces:
            out += ["## Implemented interfaces", ""]
            out += ["- %s" % i for i in ifaces]
            out.append("")
        out += ["## Factory details", "",
                "| | |", "|---|---|",
                "| Long name | %s |" % self.meta("long-name"),
                "| Classification | %s |" % self.meta("klass"),
                "| Description | %s |" % self.meta("description"),
                "| Authors | %s |" % self.meta("author").replace("|", "/"),
                "| Rank | %s |" % rank_text(self.factory.get_rank()),
                "| Plugin | [%s](index.md) |" % plugin.get_name(),
                "| Package | %s |" % plugin.get_package(), ""]
        out += ["## Pad templates", ""]
        for t in self.templates:
            out += ["### %s" % t.name_template, "", "```",
                    caps_text(t.get_caps()), "```", "",
                    "Presence – *%s*  " % t.presence.value_nick,
                    "Direction – *%s*  " % t.direction.value_nick,
                    "Object type – %s" % pad_type(t), ""]
        out += self.signal_section(False) + self.signal_section(True)
        out += ["## Properties", ""]
        if not self.properties:
            out += ["None of its own.", ""]
        for p in self.properties:
            out += self.property_entry(p)
        return "\n".join(out).rstrip() + "\n"

    def signal_section(self, action):
        sigs = [s for s in self.signals
                if bool(s.signal_flags & SIGNAL_ACTION) == action]
        if not sigs:
            return []
        out = ["## %s" % ("Action signals" if action else "Signals"), ""]
        for s in sigs:
            args = ["%s * self" % ("GstElement" if action
                                   else self.gtype.name)]
            args += ["%s arg%d" % (c_type(t), i)
                     for i, t in enumerate(s.param_types)]
            if action:
                sig = 'g_signal_emit_by_name (self, "%s"%s);' % (
                    s.signal_name, "".join(", arg%d" % i for i in
                                           range(len(s.param_types))))
            else:
                sig = "%s\n%s_callback (%s,\n    gpointer udata)" % (
                    c_type(s.return_type), s.signal_name.replace("-", "_"),
                    ", ".join(args))
            flags = [n for f, n in ((SIGNAL_RUN_FIRST, "Run First"),
                                    (SIGNAL_RUN_LAST, "Run Last"),
                                    (SIGNAL_RUN_CLEANUP, "Run Cleanup"),
                                    (SIGNAL_ACTION, "Action"))
                     if s.signal_flags & f]
            out += ["### %s" % s.signal_name, "", "```c", sig, "```", "",
                    gtkdoc_to_markdown(self.signal_doc(s.signal_name) or ""),
                    "", "Flags: %s" % " / ".join(flags), ""]
        return out

    def property_entry(self, p):
        out = ["### %s" % p.name, "", "`%s` %s" % (p.name, type_name(
            p.value_type)), "", p.blurb or "", ""]
        rows = ["Flags: %s" % flags_text(int(p.flags))]
        rows.append("Default value: %s" % format_value(p, p.default_value))
        rng = pspec_range(p)
        if rng:
            rows.append("Range: %s" % rng)
        out += ["  \n".join(rows), ""]
        if p.value_type.fundamental == GObject.TYPE_ENUM:
            out += ["Values (%s):" % p.value_type.name, ""]
            out += ["- `%s` (%d) – %s" % (ev.value_nick, int(ev),
                                          ev.value_name)
                    for ev in enum_values(p.value_type)]
            out.append("")
        return out


def pad_type(template):
    gtype = template.get_property("gtype")
    return gtype.name if gtype and gtype.name not in ("void", "invalid") \
        else "GstPad"


def rank_text(rank):
    names = {int(Gst.Rank.NONE): "none", int(Gst.Rank.MARGINAL): "marginal",
             int(Gst.Rank.SECONDARY): "secondary",
             int(Gst.Rank.PRIMARY): "primary"}
    return names.get(int(rank), str(int(rank)))


def plugin_page(plugin, elements):
    out = ["# %s" % plugin.get_name(), "", plugin.get_description(), "",
           "| | |", "|---|---|",
           "| Filename | %s |" % os.path.basename(plugin.get_filename()),
           "| Version | %s |" % plugin.get_version(),
           "| License | %s |" % plugin.get_license(),
           "| Package | %s |" % plugin.get_package(),
           "| Origin | %s |" % plugin.get_origin(), "",
           "## Elements", "", "| element | description |", "|---|---|"]
    for e in elements:
        out.append("| [%s](%s.md) | %s |" % (e.name, e.name,
                                             e.meta("description")))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("--output")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    Gst.init(None)
    plugin = Gst.Plugin.load_file(os.path.abspath(args.plugin))
    blocks = doc_blocks(args.sources)
    factories = [f for f in Gst.Registry.get().get_feature_list_by_plugin(
        plugin.get_name()) if isinstance(f, Gst.ElementFactory)]
    elements = [Element(f, blocks) for f in
                sorted(factories, key=lambda f: f.get_name())]
    if not elements:
        print("%s: no element" % args.plugin, file=sys.stderr)
        return 1

    problems = [p for e in elements for p in e.problems()]
    if args.check:
        for p in problems:
            print(p)
    if args.check and (problems or not args.output):
        print("%d elements, %d pad templates, %d properties, %d signals: "
              "%d problems" % (len(elements),
                               sum(len(e.templates) for e in elements),
                               sum(len(e.properties) for e in elements),
                               sum(len(e.signals) for e in elements),
                               len(problems)))
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        for e in elements:
            with open(os.path.join(args.output, e.name + ".md"), "w",
                      encoding="utf-8") as f:
                f.write(e.page(plugin))
        with open(os.path.join(args.output, "index.md"), "w",
                  encoding="utf-8") as f:
            f.write(plugin_page(plugin, elements))
    for e in elements:
        e.instance.set_state(Gst.State.NULL)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
