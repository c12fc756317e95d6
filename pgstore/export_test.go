package pgstore

// ListenerAppName is the application_name of the listening connection of
// a Store on schema.table.
func ListenerAppName(schema, table string) string { return listenerAppName(channelName(schema, table)) }
