package pgstore

import "github.com/leash-go/leash/driver"

// ListenerAppName is the application_name of the listening connection of
// a Store on schema.table.
func ListenerAppName(schema, table string) string { return listenerAppName(channelName(schema, table)) }

// ParsePayload decodes a notification payload into its watch group, name
// and wake-up.
func ParsePayload(p string) (group byte, name string, wake driver.Wake, ok bool) {
	key, w, ok := parsePayload(p)
	return key.group, key.name, w, ok
}

// LikePattern is the LIKE pattern List sends for a glob.
func LikePattern(glob string) string { return likePattern(glob) }
