"""A streaming read replica for the console's lists, counts, search and history.

``router`` decides where each query reads (the primary unless a console read asked for the
replica); ``probe`` asks the replica how far it has replayed and how far behind it is;
``middleware`` turns replica reads on for the read pages only, and only for a person whose
last write the replica has already replayed (read-your-writes). docs/deploy.md "Read replica".
"""
