"""The TSP case study (NFComms): TSPLIB files, 2-opt hill climbers on host, nic and gpu
placements, and a manager on the host that hands out climbs and collects the results."""
