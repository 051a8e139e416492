"""Streaming, parallel file and tree digests with a stat cache.

Layer: file access (reads files).  Everything that pins or verifies file
content goes through here.  Digests are written
``sha256:<hex>``.  Each module takes and gives one thing, low to high:

- ``digests``: what hashing gives back (``FileDigest``, ``TreeResult``,
  ``tree_digest``) and its errors;
- ``cpus``: how many workers this process may start;
- ``read``: one open file into its digest and count;
- ``files``: many files, through the stat cache (``hash_file``,
  ``hash_files``, ``from_cache``);
- ``listing``: one process's walk of a folder (``Walked``, ``KEY``);
- ``walk``: ``walk_tree`` and ``list_tree``, shared out to forked walkers;
- ``forked``: a walked tree's small files read by forked workers;
- ``tree``: ``hash_tree``, through the folder cache.

- One file is read in ``CHUNK_SIZE`` pieces into one reused buffer (constant
  memory); hashlib releases the GIL on large updates, so several files are
  hashed in parallel on a thread pool.  Small files cost Python work, not
  bytes: a tree's many small files are read by forked worker processes, and
  where nothing of a folder is cached (a first hash) the workers walk a
  share of its folders each and read every small file as they list it
  (``walk_tree(read=Ahead(...))``).
- A tree's unchanged files come from the folder cache
  (``ftmanifest.foldercache``: a compact state per folder, compared with the
  walk as two byte strings), other files' from the stat cache.
- A file whose stat (device, inode, size, mtime_ns, ctime_ns) differs before
  and after reading, or whose byte count differs from its size, raises
  ``FileChangedError`` and is never cached.
- ``count=<format>`` also counts the file's records (``ftmanifest.counts``)
  from the same chunks; for a file over one chunk, while CPUs are free, the
  hash runs on a helper thread as the reading thread counts.  json and
  parquet cannot be counted while streaming: they are read again after the
  hash, and the stat must not have moved in between.  Counts are cached by
  content digest; a cached digest without a cached count is read again.
- ``settle=True`` waits (at most ``RACY_NS``, once) until files modified in
  the last ``RACY_NS`` can be cached before reading them, so that the next
  run costs a ``stat`` (``lock`` uses it; see ``ftmanifest.statcache``).
- Nothing but a regular file is ever opened; anything else is reported as
  ``UnreadableFileError`` naming its kind (FIFO, socket, character device,
  block device, directory).
- Tree digest: sha256 over ``relpath_utf8 NUL digest LF`` for each regular
  file, sorted by the UTF-8 bytes of its '/'-separated relative path.  Empty
  folders do not count.  ``.git`` is skipped.  Symlinks are followed only
  when they resolve inside ``symlink_root`` (default: the tree's root): a
  link to a file is hashed as its target's content under the link's own
  name, a link to a folder is walked (a loop is an error), a link that
  resolves outside raises ``SymlinkEscapeError``.  Sockets, FIFOs and
  devices (or links to them) are listed like files, never opened: hashing
  reports each as an error, so ``hash_tree`` refuses a folder holding one.
"""
