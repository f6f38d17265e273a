"""Images, data sets, preprocessing and calibration sets."""
