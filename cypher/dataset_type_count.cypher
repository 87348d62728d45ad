// All relationships of one type {REL} in the graph: the servers answer this from their counts, without
// a scan. Summed over a data set's relation types it counts its facts when no other data set (and no
// edge of the store's own, see pipeline/store/status.py) uses those types.
MATCH ()-[e:{REL}]->()
RETURN count(e) AS n
