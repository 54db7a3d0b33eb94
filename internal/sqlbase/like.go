package sqlbase

import "strings"

var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// LikePrefix is the LIKE pattern (with the default escape character,
// backslash, of PostgreSQL and MySQL) matching every string that starts
// with prefix.
func LikePrefix(prefix string) string { return likeEscaper.Replace(prefix) + "%" }
