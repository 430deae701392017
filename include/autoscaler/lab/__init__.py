"""The policy lab: scenarios, ground truth and the figures a closed-loop run is judged by."""
