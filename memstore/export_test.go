package memstore

// SetTestHookBeforeRename sets the function Save runs between writing its
// temporary file and renaming it into place.
func SetTestHookBeforeRename(f func()) { testHookBeforeRename = f }
