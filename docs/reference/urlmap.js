// Where gi-docgen's pages link the types of other namespaces.
baseURLs = [
  [ 'GLib', 'https://docs.gtk.org/glib/' ],
  [ 'GObject', 'https://docs.gtk.org/gobject/' ],
  [ 'Gio', 'https://docs.gtk.org/gio/' ],
  [ 'Json', 'https://gnome.pages.gitlab.gnome.org/json-glib/' ],
]
