/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Runs a libFuzzer entry point over files, without libFuzzer: each argument
 * is a file, or a directory whose files (not subdirectories, not hidden
 * files) are run in name order. Builds without -Dfuzzing link the fuzz
 * targets with this, so their seed corpus runs as an ordinary test.
 */
#include <glib.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static gboolean
run_file (const char *path)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize len;

  if (!g_file_get_contents (path, &contents, &len, &error)) {
    g_printerr ("%s\n", error->message);
    return FALSE;
  }
  LLVMFuzzerTestOneInput ((const uint8_t *) contents, len);
  return TRUE;
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Runs every file of dir; returns how many, or -1 on an error. */
static gint
run_dir (const char *path)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GDir) dir = g_dir_open (path, 0, &error);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (dir == NULL) {
    g_printerr ("%s\n", error->message);
    return -1;
  }
  while ((name = g_dir_read_name (dir)) != NULL) {
    char *file = g_build_filename (path, name, NULL);

    if (name[0] != '.' && g_file_test (file, G_FILE_TEST_IS_REGULAR))
      g_ptr_array_add (files, file);
    else
      g_free (file);
  }
  g_ptr_array_sort (files, compare_names);
  for (guint i = 0; i < files->len; i++)
    if (!run_file (files->pdata[i]))
      return -1;
  return files->len;
}

int
main (int argc, char **argv)
{
  guint total = 0;

  if (argc < 2) {
    g_printerr ("usage: %s FILE-OR-DIRECTORY...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    gint n = 1;

    if (g_file_test (argv[i], G_FILE_TEST_IS_DIR))
      n = run_dir (argv[i]);
    else if (!run_file (argv[i]))
      n = -1;
    if (n < 0)
      return 1;
    total += n;
  }
  if (total == 0) {
    g_printerr ("no input files\n");
    return 1;
  }
  g_print ("ran %u inputs\n", total);
  return 0;
}
