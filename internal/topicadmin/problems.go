package topicadmin

import (
	"fmt"
)

// Problems returns the problems of the creation settings, named as
// kafkasink.Topics' fields.
func (s Settings) Problems() []string {
	var p []string
	if s.Partitions == 0 || s.Partitions < -1 {
		p = append(p, fmt.Sprintf("Topics.Partitions %d: want a positive count or -1 for the broker's default", s.Partitions))
	}
	if s.ReplicationFactor == 0 || s.ReplicationFactor < -1 {
		p = append(p, fmt.Sprintf("Topics.ReplicationFactor %d: want a positive factor or -1 for the broker's default", s.ReplicationFactor))
	}
	return p
}
